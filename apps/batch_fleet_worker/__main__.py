"""``python -m nodeau.apps.batch_fleet_worker``: the second container of a BatchJob's Pod."""

import sys

from nodeau.apps.batch_fleet_worker.bootstrap import main

sys.exit(main())
