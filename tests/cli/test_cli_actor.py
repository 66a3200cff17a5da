"""Who the command line records as the actor of an audited action: --actor, else $USER or
$LOGNAME, else the OS user (containers often run without $USER), at the host name."""

from __future__ import annotations

import argparse
import os
import pwd
import socket

from tickwork.cli import common


def test_the_actor_falls_back_to_the_os_user_without_user_variables() -> None:
    args = argparse.Namespace(actor=None)
    host = socket.gethostname()
    assert common.actor(argparse.Namespace(actor="ada"), {}) == "ada"
    assert common.actor(args, {"USER": "bob", "LOGNAME": "x"}) == f"bob@{host}"
    assert common.actor(args, {"LOGNAME": "carol"}) == f"carol@{host}"
    assert common.actor(args, {}) == f"{pwd.getpwuid(os.getuid()).pw_name}@{host}"
