"""The `harnessrl` entry point: every command is registered and `--help` stays light."""

import subprocess
import sys

from trainer.cli import COMMAND_MODULES, build_parser


def test_every_command_is_registered():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    # `models` is the old name of the `policy` group, kept as an alias for one release.
    assert sorted(set(sub.choices) - {"models"}) == sorted(COMMAND_MODULES)
    assert sub.choices["models"] is sub.choices["policy"]


def test_help_lists_commands_without_importing_torch():
    code = (
        "import sys\n"
        "from trainer.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('HEAVY', sorted(m for m in ('torch', 'trl', 'transformers', 'chromadb') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for name in COMMAND_MODULES:
        assert name in out
    assert "HEAVY []" in out
