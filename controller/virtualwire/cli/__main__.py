"""`python -m virtualwire.cli` is vwctl."""
import sys

from virtualwire.cli.vwctl import main

sys.exit(main())
