#!/usr/bin/env python3
"""Every HTR_* environment variable the code names is documented.

Scans the sources (runtime, scheduler, ops, plugins, samples, tools, python; not tests) for string
literals "HTR_NAME" and checks that each is named in backticks in README.md's Environment section
or, for a plugin's own variables, in that plugin's README. A variable added without a line in a
table fails here, so the code and the documented list cannot drift apart.

usage: env_documented.py SOURCE_ROOT
"""
import pathlib
import re
import sys

SOURCE_DIRS = ["runtime", "scheduler", "ops", "plugins", "samples", "tools", "python"]
SUFFIXES = {".cc", ".h", ".c", ".py", ".sh"}
LITERAL = re.compile(r"""["'](HTR_[A-Z0-9_]+)["']""")
NAMED = re.compile(r"`(HTR_[A-Z0-9_]+)")


def read_names(root):
    """{variable: [files that name it as a string literal]}"""
    names = {}
    for d in SOURCE_DIRS:
        for f in sorted((root / d).rglob("*")):
            if f.suffix not in SUFFIXES or not f.is_file():
                continue
            for n in LITERAL.findall(f.read_text(errors="replace")):
                names.setdefault(n, []).append(str(f.relative_to(root)))
    return names


def environment_section(readme):
    text = readme.read_text()
    start = text.find("\n## Environment")
    if start < 0:
        sys.exit(f"{readme}: no '## Environment' section")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def main():
    root = pathlib.Path(sys.argv[1])
    documented = set(NAMED.findall(environment_section(root / "README.md")))
    plugin_docs = {p.name: set(NAMED.findall((p / "README.md").read_text()))
                   for p in (root / "plugins").iterdir() if (p / "README.md").is_file()}
    names = read_names(root)
    missing = []
    for n, files in sorted(names.items()):
        if n in documented:
            continue
        plugins = {pathlib.Path(f).parts[1] for f in files if f.startswith("plugins/")}
        if plugins and all(n in plugin_docs.get(p, set()) for p in plugins) and \
                all(f.startswith("plugins/") for f in files):
            continue
        missing.append(f"{n} (read in {', '.join(sorted(set(files)))})")
    print(f"env_documented: {len(names)} variables named in the sources, "
          f"{len(documented)} in README.md's Environment section")
    if missing:
        print("not documented in README.md's Environment section (or the plugin's README):")
        for m in missing:
            print("  " + m)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
