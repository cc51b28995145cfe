"""``python -m pypm_verified COMMAND ...``: the command line (:mod:`.cli`)."""
from .cli.app import run

if __name__ == "__main__":
    run()
