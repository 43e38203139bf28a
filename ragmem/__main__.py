"""``python -m ragmem``: the same command line as ``ragmem``."""

from ._cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
