"""Validation of the built-in starter pack, end to end through palaestra.

Every task runs as a real episode: the Harbor loader reads it, ``CodeEnv`` puts it in a local
bubblewrap sandbox, the bash scaffold runs the policy's commands, the Harbor verifier scores it
(``test_episodes.py``):

* ``nop`` (submit at once) scores 0 on every task;
* ``oracle`` (the reference solution, through the LLM boundary) scores 1;
* ``wrong:<name>``: plausible but wrong solutions (the pack's ``wrong_solutions/<name>/``,
  which ``palaestra tasks check starter`` runs too) do not get full reward.

It also checks every ``task.toml`` and that the 18 (category, difficulty) pairs appear once each
(``test_static.py``).
"""
