"""The execution boundary's errors: what failed is the infrastructure, not the task."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """A sandbox could not be created or used (an infrastructure failure, not a task failure)."""


class SandboxSpecError(SandboxError):
    """The sandbox cannot be made as asked, and asking again gives the same answer: a spec the
    backend cannot honour, a root filesystem or image without what the backend needs, an image
    that cannot be had, a build that fails. Unlike a plain :class:`SandboxError` (a sandbox that
    failed to start in time, died, or lost its connection) it is not worth a retry."""


class SandboxClosedError(SandboxError):
    """An operation was attempted on a sandbox that is already closed."""
