"""Print the molecule scenarios in the order `make molecule` runs them."""
from pathlib import Path

# Foundation first, then the scenarios that build on it; any other scenario after them.
ORDER = ["default", "hostprep", "model_cache", "serving", "sweep", "fleet", "real_engine", "monitoring"]
found = sorted(p.parent.name for p in Path("molecule").glob("*/molecule.yml"))
print(" ".join([s for s in ORDER if s in found] + [s for s in found if s not in ORDER]))
