"""``python -m nodeau.apps.dashboard --home HOME --port P``: the local dashboard on
127.0.0.1:P (the composition root; the user service ``nodeau_dashboard`` runs this).

Why it is so: docs/adr/decisions/apps-dashboard.md (__main__.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from nodeau.adapters.dashboard_service import CARRIED, CARRIED_PREFIXES, folder, read_service
from nodeau.adapters.dashboard_token import TOKEN_FILE, TokenFile
from nodeau.adapters.endpoint_client import HttpxEndpointClient
from nodeau.adapters.endpoint_metrics import metrics_texts
from nodeau.adapters.private_files import keep_private
from nodeau.adapters.this_machine import inventory_for
from nodeau.apps.cli.bootstrap import plane, settings
from nodeau.apps.dashboard.app import create_app
from nodeau.apps.dashboard.qualification import ModelQualification, model_qualifications
from nodeau.apps.dashboard.server import serve
from nodeau.apps.models import bootstrap as model_services
from nodeau.apps.planes.status_rows import StatusRow, status_rows
from nodeau.apps.settings import utc_now
from nodeau.domain.hardware import MachineReading


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nodeau.apps.dashboard",
        description="Serve the local dashboard on 127.0.0.1 (only).",
    )
    parser.add_argument("--home", required=True, type=Path, help="the NODEAU_HOME it serves")
    parser.add_argument("--port", required=True, type=int, help="its port")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning"))
    args = parser.parse_args(argv)
    keep_private(args.home)  # before it writes: ADR 0021
    saved = read_service(args.home)
    if saved is None:
        print(f"nodeau dashboard: no {folder(args.home)}/service.json: run nodeau dashboard",
              file=sys.stderr)  # fmt: skip
        return 2
    for key in [k for k in os.environ if k in CARRIED or k.startswith(CARRIED_PREFIXES)]:
        del os.environ[key]
    os.environ.update(saved[1])  # what settings() reads from here on

    def model_rows() -> tuple[StatusRow, ...]:
        s = model_services.build(settings())
        return status_rows(s.store.files(), s.registry.book(), s.catalog(), s.settings.machine)

    def qualifications() -> tuple[ModelQualification, ...]:
        s = model_services.build(settings())  # as nodeau model info reads them
        return model_qualifications(
            s.store.files(), s.registry.book(), s.catalog(), s.registry.evidence()
        )

    def cards() -> MachineReading:
        s = settings()  # as nodeau machine reads them: simulated, else NVML
        return inventory_for(s.machine, s.simulated_gpus).read()

    app = create_app(
        plane(),
        client=HttpxEndpointClient(),
        model_rows=model_rows,
        qualifications=qualifications,
        cards=cards,
        metrics=metrics_texts,
        token=TokenFile(folder(args.home) / TOKEN_FILE),
        clock=utc_now,
    )
    serve(app, args.port, log_level=args.log_level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
