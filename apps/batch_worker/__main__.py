"""``python -m nodeau.apps.batch_worker``: the detached worker ``nodeau batch submit`` starts."""

import sys

from nodeau.apps.batch_worker.bootstrap import main

sys.exit(main())
