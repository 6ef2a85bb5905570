"""Which workflow changes a running workflow of a supported release must still replay: the patch lifecycle.

A change to workflow code that a workflow started by the previous release could replay differently (a
new activity before an old one, a timer removed) is made behind ``workflow.patched(PATCH_ID)``, as the
Temporal docs describe (https://docs.temporal.io/develop/python/versioning#patching):

1. the release that makes the change adds the patch: ``if workflow.patched(ID): new else: old``;
2. the next release deprecates it: ``workflow.deprecate_patch(ID)`` and the new code alone (a workflow of
   the release before still replays, since the marker is written and no longer branched on);
3. the release after removes the call.

Every live patch is listed in ``PATCHES`` with the release that added it; ``tests/replay/test_replay.py``
refuses a ``workflow.patched`` or ``workflow.deprecate_patch`` id that is not listed, a patch still asked
(``patched``) a release after it was added, and one still deprecated two releases after. The replay test
replays the recorded histories of the supported releases (``tests/replay/histories/<release>/``): the
current one and the one before. Release 0.1.0 collapsed every patch of the pre-release code to its new
branch and recorded its histories afresh.
"""

from __future__ import annotations

RELEASE = "0.1.0"
"""The release this code is (``podmedic.__version__``): the one whose histories are recorded next."""

SUPPORTED = ("0.1.0",)
"""Releases whose running workflows this code must replay, newest first: this one and the one before."""

PATCHES: dict[str, str] = {
    "lemon-waits-for-vendor": "0.1.0", "given-back-notes-ticket": "0.1.0", "keep-spares": "0.1.0",
    "device-history-by-uuid": "0.1.0",
}
"""Live patch id -> the release that added it. Empty right after a release that removed them all."""
