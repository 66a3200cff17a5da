"""The App the worker processes of the container-job tests serve (``--app``): no tasks of its
own; ``--container-jobs`` adds the container-job task."""

import tickwork

app = tickwork.App()
