"""Non-coding environments, as :class:`~palaestra.env.tools.ToolEnv` scenarios: twenty
questions and Mastermind (the ``games`` presets). See docs/tool-envs.md."""
