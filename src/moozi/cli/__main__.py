"""``python -m moozi.cli``: the ``moozi`` program."""

from moozi.cli.main import run

run()
