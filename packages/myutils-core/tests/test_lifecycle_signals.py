"""``signals_deferred``: Ctrl-C and SIGTERM inside the block wait for its end, then act as they would have."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import os, signal, sys
    from my_utils.core.errors import Terminated
    from my_utils.core.lifecycle import signals_deferred, sigterm_exits

    first, handled = getattr(signal, sys.argv[1]), sys.argv[2] == "handled"
    steps = []
    try:
        with sigterm_exits() if handled else open(os.devnull):
            with signals_deferred():
                os.kill(os.getpid(), first)
                os.kill(os.getpid(), signal.SIGINT if first == signal.SIGTERM else signal.SIGTERM)
                steps.append("the block ran to its end")
                print("the end of the block", flush=True)
            steps.append("after the block")
    except Terminated as exc:
        print(steps, "Terminated", exc.code, flush=True)
    except KeyboardInterrupt:
        print(steps, "KeyboardInterrupt", flush=True)
    else:
        print(steps, "nothing", flush=True)
    print("handlers back:", signal.getsignal(signal.SIGINT) is signal.default_int_handler, flush=True)
''')


@pytest.mark.parametrize(("first", "handled", "said", "code"), [
    ("SIGTERM", "handled", "['the block ran to its end'] Terminated 143", 0),
    ("SIGINT", "handled", "['the block ran to its end'] KeyboardInterrupt", 0),
    ("SIGINT", "default", "['the block ran to its end'] KeyboardInterrupt", 0),
    ("SIGTERM", "default", "", -15),  # SIGTERM's default action, once the block has ended
])
def test_the_first_signal_held_acts_when_the_block_ends(first: str, handled: str, said: str, code: int) -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, first, handled], capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == (["the end of the block", said, "handlers back: True"] if said else ["the end of the block"]), \
        proc.stdout
