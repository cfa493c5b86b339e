"""Execute the library notebooks in place, so that each keeps the outputs of its examples (as a reader sees them).

    uv run python tools/run_notebooks.py                 # every notebook under nbs/ but the report templates
    uv run python tools/run_notebooks.py nbs/rl/23_advantages.ipynb ...

Each notebook runs top to bottom in its own folder, as `uv run pytest tests/test_notebooks.py` runs it; cells marked
`#| slow` are skipped (they keep no output). Output that only reports progress (progress bars, carriage returns)
is dropped and long outputs are cut, so that a diff of a refreshed notebook stays readable. A notebook whose example
fails is left unchanged and named, and the command exits 1. Run `uv run nbdev_clean` afterwards, as after any edit.
"""
import json, re, sys, time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAX_LINES = 40          # lines kept of one text output
SKIP = {"slow"}         # the flags of cells that are not run here


def notebooks(args: list[str]) -> list[Path]:
    "The notebooks named in `args`, or every library notebook (the report templates excepted)."
    if args: return [Path(a).resolve() for a in args]
    return sorted(p for p in (REPO / "nbs").rglob("*.ipynb")
                  if "reports" not in p.parts and ".ipynb_checkpoints" not in p.parts and not p.name.startswith("_"))


def flags(source: str) -> set[str]:
    "The `#| flag` directives at the top of a cell."
    out = set()
    for line in source.splitlines():
        if not line.startswith("#|"): break
        out.update(line[2:].split())
    return out


def readable(outputs: list) -> list:
    "`outputs` without progress-bar text and widget data, each text cut to `MAX_LINES` lines."
    kept = []
    for o in outputs:
        if o.get("output_type") == "stream":
            text = "".join(o.get("text", ""))
            text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))        # a bar's last state only
            lines = [l for l in text.split("\n") if not re.search(r"\d+%\|", l)]          # tqdm bars
            text = "\n".join(lines).strip("\n")
            if not text: continue
            if len(lines) > MAX_LINES: text = "\n".join(lines[:MAX_LINES]) + f"\n... ({len(lines) - MAX_LINES} more lines)"
            kept.append({"name": o.get("name", "stdout"), "output_type": "stream", "text": text + "\n"})
        elif o.get("output_type") in ("execute_result", "display_data"):
            data = {k: v for k, v in o.get("data", {}).items() if not k.startswith("application/vnd.jupyter.widget")}
            if not data: continue
            kept.append({**o, "data": data})
        else: kept.append(o)
    return kept


def run(path: Path) -> bool:
    "Execute `path` in place; False (and the notebook untouched) when a cell fails."
    import os
    from execnb.nbio import read_nb
    from execnb.shell import CaptureShell
    nb = read_nb(path)
    shell = CaptureShell(path)
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        shell.run_all(nb, exc_stop=True, preproc=lambda c: c.cell_type != "code" or bool(flags(c.source) & SKIP))
    except Exception:
        sys.stderr.write(f"{path.relative_to(REPO)} failed:\n{shell.prettytb(fname=path)}\n")
        return False
    finally: os.chdir(cwd)
    raw = json.loads(path.read_text())              # the file as it was: its cells' source format is kept
    assert len(raw["cells"]) == len(nb.cells)
    for mine, ran in zip(raw["cells"], nb.cells):
        if mine["cell_type"] == "code":
            mine["outputs"] = readable([dict(o) for o in ran.get("outputs", [])])
            mine["execution_count"] = None
    path.write_text(json.dumps(raw, indent=1, ensure_ascii=False) + "\n")
    return True


def main(args: list[str]) -> int:
    os_env = __import__("os").environ
    os_env.setdefault("IN_TEST", "1")
    sys.path.insert(0, str(REPO))
    failed = []
    for path in notebooks(args):
        t0 = time.perf_counter()
        ok = run(path)
        print(f"{'ok    ' if ok else 'FAILED'} {path.relative_to(REPO)} ({time.perf_counter() - t0:.0f} s)", flush=True)
        if not ok: failed.append(path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
