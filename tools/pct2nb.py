"""Convert a percent-format script (`# %%` code cells, `# %% [markdown]` prose cells) into a notebook."""
import sys, re, json, hashlib
from pathlib import Path


def _cell(kind, lines):
    "One notebook cell of `kind` from its source `lines`."
    while lines and not lines[-1].strip(): lines.pop()
    while lines and not lines[0].strip(): lines.pop(0)
    if kind == "markdown": lines = [re.sub(r"^# ?", "", l) for l in lines]
    src = "\n".join(lines)
    cell = {"cell_type": kind, "metadata": {}, "source": src}
    if kind == "code": cell.update(execution_count=None, outputs=[])
    return cell


def convert(text):
    "Notebook dict from percent-format `text`; `# %% tags=[\"parameters\"]` sets cell tags."
    cells, kind, meta, lines = [], None, {}, []
    for line in text.splitlines():
        m = re.match(r"^# %%(.*)$", line)
        if m:
            if kind is not None:
                c = _cell(kind, lines); c["metadata"].update(meta); cells.append(c)
            rest = m.group(1)
            kind = "markdown" if "[markdown]" in rest else "code"
            tags = re.search(r"tags=\[(.*?)\]", rest)
            meta = {"tags": [t.strip().strip("\"'") for t in tags.group(1).split(",")]} if tags else {}
            lines = []
        elif kind is not None: lines.append(line)
    if kind is not None:
        c = _cell(kind, lines); c["metadata"].update(meta); cells.append(c)
    for i, c in enumerate(cells):  # stable ids, so exported modules do not change between conversions
        c["id"] = hashlib.sha1(f"{i}:{c['source']}".encode()).hexdigest()[:8]
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "python3", "language": "python", "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    Path(dst).write_text(json.dumps(convert(Path(src).read_text()), indent=1) + "\n")
