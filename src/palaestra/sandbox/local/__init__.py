"""The local backend: sandboxes made of Linux namespaces with bubblewrap.

A sandbox is one long-lived ``bwrap`` process with its own mount, pid, network, ipc and uts
namespaces. Its root is an empty read-only tmpfs on which the host's system directories
(``/usr``, ``/etc``...) are bound read-only; the writable directories of the spec (the workdir,
``/tmp``, ``/logs``..., plus ``/root`` and ``/var/tmp``) are bound from per-sandbox directories
on the host under the state directory. Nothing else of the host is visible.

Pid 1 of the sandbox is a small stdlib-only helper (:mod:`palaestra.sandbox._helper`) that runs
commands on request over bwrap's stdin/stdout, so an exec costs a round trip, not a process
launch. Files move in and out as tar streams through the helper, never by touching the backing
directories from the host: a symlink planted inside would make host-side paths escape. (The
one exception is a warm sandbox's spec files, copied in on the host when it is handed out,
before anything but the helper ran in it; see :class:`LocalBackend`.)

Requirements: Linux, bubblewrap, and running as root (or with a setuid bwrap). The helper runs
on the bundle of the host's own Python (:mod:`palaestra.sandbox.helper_runtime`), whatever the
sandbox's root filesystem holds.

The package's modules, by concept: :mod:`.backend` (:class:`LocalBackend`: create, the
start-up janitor pass, options, closing everything at exit), :mod:`.pool` (the warm pools),
:mod:`.sandbox` (:class:`LocalSandbox`: start, close, kill), :mod:`.layout` (the sandbox's
directories and files on the host, and bubblewrap's command line) and :mod:`.snapshot` (a
sandbox's files copied while it is frozen, to restore from).
"""

from palaestra.sandbox.local.backend import DEFAULT_STATE_DIR, WARM_ENV, LocalBackend
from palaestra.sandbox.local.bwrap import BASE_ENV, CAPABILITIES, ETC_SECRETS, SYSTEM_DIRS
from palaestra.sandbox.local.layout import EXTRA_WRITABLE_DIRS
from palaestra.sandbox.local.sandbox import LocalSandbox

__all__ = [
    "BASE_ENV",
    "CAPABILITIES",
    "DEFAULT_STATE_DIR",
    "ETC_SECRETS",
    "EXTRA_WRITABLE_DIRS",
    "SYSTEM_DIRS",
    "WARM_ENV",
    "LocalBackend",
    "LocalSandbox",
]
