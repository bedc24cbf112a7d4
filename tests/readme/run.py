#!/usr/bin/env python3
"""tests/readme/run.py: runs every code block of README.md as written, in order.

Each fenced block runs unless the line before it is a marker comment:
  <!-- readme-test: skip (why) -->       not run (the reason is printed)
  <!-- readme-test: file NAME -->        saved as NAME, for a later block to use
Blocks run in a scratch folder that looks like the repository root (a link to
each of its top-level entries, so files a block writes stay out of the
checkout) with a fresh virtual environment first on PATH, the way a user who
just cloned the repository would type them: ```sh blocks with bash -e,
```python blocks saved to a file and run with that environment's python. A block in any other
language without a marker fails: every block either runs or says why not.
Prints one line per block and a closing "readme: N passed, M failed".
Usage: tests/readme/run.py [SCRATCH_DIR] (default build/readme).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARKER = re.compile(r"<!--\s*readme-test:\s*(skip|file)\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\S*)\s*$")
LIMIT_S = 600


def blocks(text: str):
    """Yields (line, language, marker, argument, body) for each fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while j < len(lines) and lines[j] != "```":
            j += 1
        prev = lines[start - 1] if start > 0 else ""
        mark = MARKER.search(prev)
        yield (start + 1, lang, mark.group(1) if mark else None, mark.group(2) if mark else "",
               "\n".join(lines[start + 1:j]) + "\n")
        i = j + 1


def scratch(path: str) -> dict:
    """Makes the scratch folder and its virtual environment; returns the blocks' environment."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    for name in os.listdir(ROOT):
        if name not in (".git", "build") and not name.startswith(".venv"):
            os.symlink(os.path.join(ROOT, name), os.path.join(path, name))
    os.symlink(os.path.join(ROOT, "build"), os.path.join(path, "build"))
    env_dir = os.path.join(path, ".venv")
    venv.create(env_dir, with_pip=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PURLIN_LIBRARY", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=os.path.join(env_dir, "bin") + os.pathsep + os.environ["PATH"], VIRTUAL_ENV=env_dir,
               PURLIN_ATOM=os.environ.get("PURLIN_ATOM", "host"), PURLIN_TIMEOUT=os.environ.get("PURLIN_TIMEOUT", "30"),
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_ROOT_USER_ACTION="ignore", PURLIN_README_TEST="1")
    return env


def main() -> int:
    if os.environ.get("PURLIN_README_TEST"):  # a block that runs `make test` would start it again
        print("readme: 0 passed, 1 failed (started from a README block: a block runs `make test`)")
        return 1
    where = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "readme"))
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        found = list(blocks(f.read()))
    env = scratch(where)
    passed = failed = 0
    for line, lang, mark, arg, body in found:
        what = f"README.md:{line} ```{lang}"
        if mark == "skip":
            print(f"skip {what}: {arg.strip('()')}")
            continue
        if mark == "file":
            with open(os.path.join(where, arg), "w", encoding="utf-8") as f:
                f.write(body)
            print(f"PASS {what}: saved as {arg}")
            passed += 1
            continue
        if lang == "sh":
            cmd = ["bash", "-euo", "pipefail", "-c", body]
        elif lang == "python":
            script = os.path.join(where, f"readme_{line}.py")  # a file: spawned processes re-import it
            with open(script, "w", encoding="utf-8") as f:
                f.write(body)
            cmd = [os.path.join(where, ".venv", "bin", "python"), script]
        else:
            print(f"FAIL {what}: no way to run a ```{lang} block; mark it <!-- readme-test: skip (why) --> "
                  "or <!-- readme-test: file NAME -->")
            failed += 1
            continue
        try:
            done = subprocess.run(cmd, cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=LIMIT_S)
            rc, out = done.returncode, done.stdout
        except subprocess.TimeoutExpired as exc:
            rc, out = "timeout", exc.stdout or ""
        print(out, end="" if out.endswith("\n") or not out else "\n")
        if rc == 0:
            print(f"PASS {what}")
            passed += 1
        else:
            print(f"FAIL {what}: exited {rc}")
            failed += 1
    print(f"readme: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
