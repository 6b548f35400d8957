"""Pulumi entry point: ``pulumi up`` on a stack runs this file.

Pulumi puts ``platform/`` first on ``sys.path``; this directory is never a
package (no ``__init__.py``) so that ``import platform`` keeps meaning the
standard library. The program itself lives in ``stepway_infra``.
"""

from pathlib import Path

from stepway_infra.config import from_pulumi_config
from stepway_infra.program import run
from workers.catalog import load_catalog

REPO_ROOT = Path(__file__).resolve().parent.parent

run(from_pulumi_config(), load_catalog(REPO_ROOT / "workers"))
