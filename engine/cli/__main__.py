"""`python -m engine.cli`: the same commands as `lethe`."""

from engine.cli import main

main()
