#!/usr/bin/env python3
"""Split `strace -f -v -s 1000000 -e trace=execve,read,write` output of a
launcher run into one transcript per rank process: only the reads and writes
on the rank's PMI socket (the fd of its first `cmd=init` write), in the
format of ../*.txt. Usage: extract.py RAW PROGRAM_NAME OUT_PREFIX
Writes OUT_PREFIX_parent_rank<R>.txt / OUT_PREFIX_child_rank<R>.txt (R from
PMI_RANK or PMI_ID in the execve environment, else the order of start)."""
import re
import sys

raw, prog, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
line_re = re.compile(r'^(\d+)\s+(.*)$')
exec_re = re.compile(r'execve\("([^"]*)", \[(.*?)\], (?:\[(.*?)\]|0x[0-9a-f]+ /\* .* \*/)\)\s+= 0')
io_re = re.compile(r'^(read|write)\((\d+), "')

ranks = {}      # pid -> (role, rank)
lines = {}      # pid -> [line]
pmi_fd = {}     # pid -> fd
order = {"parent": 0, "child": 0}
pending = {}    # pid -> partial "unfinished" line

for text in open(raw, errors="replace"):
    m = line_re.match(text.rstrip("\n"))
    if not m:
        continue
    pid, rest = int(m.group(1)), m.group(2)
    if "<unfinished ...>" in rest:
        pending[pid] = rest.replace(" <unfinished ...>", "")
        continue
    if rest.startswith("<... "):
        head = pending.pop(pid, None)
        if head is None:
            continue
        rest = head + rest[rest.index("resumed>") + len("resumed>"):]
    e = exec_re.search(rest)
    if e and e.group(1).endswith("/" + prog):
        role = "child" if '"--child"' in e.group(2) else "parent"
        env = e.group(3) or ""
        r = re.search(r'"PMI_RANK=(\d+)"', env) or re.search(r'"PMI_ID=(\d+)"', env)
        rank = int(r.group(1)) if r else order[role]
        order[role] += 1
        ranks[pid] = (role, rank)
        lines[pid] = []
        continue
    if pid not in ranks:
        continue
    io = io_re.match(rest)
    if not io:
        continue
    fd = int(io.group(2))
    if pid not in pmi_fd:
        if io.group(1) == "write" and (rest.startswith('write(%d, "cmd=init' % fd)
                                       or rest.startswith('write(%d, "cmd=initack' % fd)):
            pmi_fd[pid] = fd
        else:
            continue
    if fd == pmi_fd[pid]:
        lines[pid].append("%d  %s\n" % (pid, rest))

for pid, (role, rank) in sorted(ranks.items(), key=lambda kv: kv[1]):
    if not lines[pid]:
        continue
    name = "%s_%s_rank%d.txt" % (prefix, role, rank)
    with open(name, "w") as f:
        f.writelines(lines[pid])
    print(name, len(lines[pid]))
