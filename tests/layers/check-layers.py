#!/usr/bin/env python3
"""check-layers.py - the folders of core/ form layers: no include cycle.

Reads every #include "..." line of core/<folder>/*.[ch], maps each to the
folder of the header it names (a bare name is the including file's own
folder; "folder/name.h" is that folder), and prints the folder graph, each
folder with the folders it includes. Fails (exit 1) on:
  - a cycle between folders (the cycle is printed);
  - an include of a header that does not exist under core/;
  - core/ including anything of fs/, tools/ or tests/ (the engine knows
    nothing of the programs built on it);
  - a folder of core/ without a README.md saying what it owns.

    tests/layers/check-layers.py [CORE_DIR]     (default: core/ of this tree)

Prints "ok layers" or "not ok layers" last, the form tests/run.sh counts.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_graph(core):
    """{folder: {included folder: [example file -> header]}} and problems."""
    graph, problems = {}, []
    folders = sorted(d for d in os.listdir(core) if os.path.isdir(os.path.join(core, d)))
    for folder in folders:
        graph.setdefault(folder, {})
        if not os.path.isfile(os.path.join(core, folder, 'README.md')):
            problems.append(f'core/{folder}/ has no README.md')
        for name in sorted(os.listdir(os.path.join(core, folder))):
            if not name.endswith(('.c', '.h')):
                continue
            path = os.path.join(core, folder, name)
            with open(path, encoding='utf-8', errors='replace') as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                target = resolve(core, folder, inc)
                if target is None:
                    problems.append(f'core/{folder}/{name}: #include "{inc}" names no header of core/')
                elif target != folder:
                    graph[folder].setdefault(target, []).append(f'{name} -> {inc}')
    return graph, problems


def resolve(core, folder, inc):
    parts = os.path.normpath(os.path.join(folder, inc)).split(os.sep)
    if parts[0] == '..' or len(parts) < 2:
        return None
    if os.path.isfile(os.path.join(core, folder, inc)):
        return parts[0] if parts[0] != '..' else None
    if '/' in inc and os.path.isfile(os.path.join(core, inc)):
        return inc.split('/')[0]
    return None


def find_cycle(graph):
    """One cycle as a list of folders, or None (depth-first, colours)."""
    colour, stack = {}, []

    def visit(node):
        colour[node] = 'grey'
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if colour.get(nxt) == 'grey':
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in colour:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        colour[node] = 'black'
        return None

    for node in sorted(graph):
        if node not in colour:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def layers(graph):
    """Each folder's height: 0 for one that includes no folder."""
    height = {}

    def h(node):
        if node not in height:
            height[node] = 0
            height[node] = 1 + max((h(n) for n in graph[node]), default=-1)
        return height[node]

    for node in graph:
        h(node)
    return height


def programs_included(core):
    bad = []
    for folder, _, files in os.walk(core):
        for name in files:
            if not name.endswith(('.c', '.h')):
                continue
            with open(os.path.join(folder, name), encoding='utf-8', errors='replace') as f:
                for inc in INCLUDE.findall(f.read()):
                    norm = os.path.normpath(os.path.join(os.path.relpath(folder, core), inc))
                    if norm.startswith('..') or inc.split('/')[0] in ('fs', 'tools', 'tests'):
                        bad.append(f'{os.path.relpath(os.path.join(folder, name), core)}: #include "{inc}"')
    return bad


def main():
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    core = sys.argv[1] if len(sys.argv) > 1 else os.path.join(top, 'core')
    graph, problems = folder_graph(core)
    problems += [f'core/{b} reaches outside core/' for b in programs_included(core)]
    cycle = find_cycle(graph)
    if cycle:
        problems.append('include cycle between folders: ' + ' -> '.join(cycle))
        for a, b in zip(cycle, cycle[1:]):
            problems.append(f'  {a} -> {b}: ' + '; '.join(graph[a][b][:3]))
    else:
        height = layers(graph)
        print('core/ folders, lowest layer first (folder: the folders it includes)')
        for folder in sorted(graph, key=lambda f: (height[f], f)):
            print(f'  {height[folder]}  {folder}: {" ".join(sorted(graph[folder])) or "-"}')
    for p in problems:
        print('  ' + p)
    print('not ok layers' if problems else 'ok layers')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
