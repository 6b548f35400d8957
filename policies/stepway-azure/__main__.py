"""The Stepway policy pack: ``pulumi preview --policy-pack policies/stepway-azure``.

This file only builds the pack; the rules are in ``stepway_infra/policy_rules.py``
(tested by tests/infra/test_policies.py). The repository root is put on the path so
that the pack runs from a checkout as well as from the project's environment.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pulumi_policy import EnforcementLevel, PolicyPack

from stepway_infra.policy_rules import build_policies

PolicyPack(
    name="stepway-azure",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=build_policies(),
)
