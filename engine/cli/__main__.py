"""`python -m engine.cli`: the same commands as `lethe`."""
from . import main

main()
