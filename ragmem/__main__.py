"""``python -m ragmem``: the same command line as ``ragmem``."""

if __name__ == "__main__":  # pragma: no cover
    from ._config import drop_working_directory

    drop_working_directory()  # a module planted in the working directory is never imported (see its docstring)

    from ._cli import main

    main()
