"""docs/models.md stays true to the model matrix the tests run."""

from pathlib import Path

from architectures import ARCHITECTURES
from models import CASES

DOC = Path(__file__).resolve().parents[1] / "docs" / "models.md"


def test_models_table_matches_test_matrix():
    rows = {}
    for line in DOC.read_text().split("## More torchvision architectures")[0].splitlines():  # the first table
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0] in CASES:
            rows[cells[0]] = dict(zip(("export", "script", "trace"), cells[1:4]))
    assert set(rows) == set(CASES), f"models.md lists {sorted(rows)}, tests run {sorted(CASES)}"
    for name, case in CASES.items():
        for method in ("export", "script", "trace"):
            expected = "yes" if method in case.methods else "no"
            assert rows[name][method] == expected, f"models.md says {name}/{method} = {rows[name][method]}"


def test_architectures_table_matches_their_tests():
    rows = {}
    for line in DOC.read_text().split("## More torchvision architectures")[1].split("## Swept by hand")[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in ARCHITECTURES:
            rows[cells[0]] = int(cells[1])
    assert rows == {name: size for name, (size, _) in ARCHITECTURES.items()}, \
        f"models.md lists {rows}, tests/test_architectures.py runs {ARCHITECTURES}"
