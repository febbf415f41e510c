"""The scripts in examples/ run, and do what they say."""
import pathlib
import runpy

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def test_compiled_training_fits_and_records_once(capsys):
    namespace = runpy.run_path(str(EXAMPLES / "compiled_training.py"))
    final = namespace["main"](steps=200)
    assert final < 1e-3
    assert namespace["loss"].recordings == 1
    w, c = namespace["w"].item(), namespace["c"].item()
    assert abs(w - 1.7) < 0.05 and abs(c - 0.3) < 0.05
    assert "recordings: 1" in capsys.readouterr().out
