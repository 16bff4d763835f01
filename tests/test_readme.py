"""The README's Python examples run and print what the README says they print."""
import contextlib
import io
import pathlib
import re

import dataflow as df

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_starts_with_two_setup_commands():
    text = README.read_text()
    first_block = re.search(r"```bash\n(.*?)```", text, re.S).group(1).strip().splitlines()
    assert len(first_block) == 2
    assert "examples/" in first_block[0] and "pytest" in first_block[1]


def test_readme_examples_run():
    tour, raw_loop = _python_blocks()[:2]
    out = io.StringIO()
    with df.Graph().as_default(), contextlib.redirect_stdout(out):
        namespace = {}
        exec(compile(tour, "README-tour", "exec"), namespace)
    lines = out.getvalue().splitlines()
    assert float(lines[0]) == 11.0
    assert float(lines[2]) == 32.0
    with df.Graph().as_default():
        namespace = {"tf": df}
        exec(compile(raw_loop, "README-raw-loop", "exec"), namespace)
        assert df.Session().run(namespace["out"]) == 3


def test_readme_eager_example_prints_what_it_says():
    block = next(b for b in _python_blocks() if "eager_mode" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README-eager", "exec"), {"tf": df})
    assert out.getvalue().split() == ["True", "(2,", "1)"]
    assert not df.executing_eagerly()
