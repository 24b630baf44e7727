"""``python -m nodeau.apps.cloud --home HOME``: the reporter, as ``connect --fleet`` starts it.

It is ``nodeau cloud run`` with NODEAU_HOME set to ``HOME`` (the rest of the environment
is the one ``connect`` ran in): the same plane, the same settings.
"""

from __future__ import annotations

import argparse
import os

from nodeau.apps.cli.main import run


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m nodeau.apps.cloud")
    parser.add_argument("--home", required=True)
    parser.add_argument("--once", action="store_true")
    args = parser.parse_args()
    os.environ["NODEAU_HOME"] = args.home
    run(["cloud", "run", *(["--once"] if args.once else [])])


if __name__ == "__main__":
    main()
