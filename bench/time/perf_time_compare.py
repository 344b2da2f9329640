#!/usr/bin/env python3
"""Each call's time three ways, on one emulated recording: ours (decode's slice begins),
perf's (`perf script --itrace=b` on `export perf`), and the truth (the emulator's ground
truth, CALL records). Prints the distribution of ours-perf, ours-truth and perf-truth
(p50, p99, max of |difference|, in ns and in MTC periods) as a Markdown table.

usage: perf_time_compare.py PTRACE_DIRECT TRACE_DIR GROUND_TRUTH WORK_DIR
       perf_time_compare.py --check PTRACE_DIRECT PROGRAM WORK_DIR
Exits 0 with a printed reason when perf cannot decode the export.
--check (the ctest): records PROGRAM with the ptrace emulator and its ground truth into
WORK_DIR, compares, and fails (exit 1) unless half the calls of ours are within 1 ns of
the truth and every call, ours and perf's, within one MTC period of it; exits 77
(skipped) with the reason when `perf` is absent or cannot decode the export.
"""
import difflib
import json
import os
import re
import shutil
import subprocess
import sys


def leb(data, pos):
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def zigzag(v):
    return (v >> 1) ^ -(v & 1)


def truth_calls(path):
    """(time, target) of every CALL record, all threads, in file order (docs/emulation-ptrace.md)."""
    data = open(path, 'rb').read()
    if data[:8] != b'PTDGTRU1':
        sys.exit(f'{path}: not a ground-truth file')
    pos, time, calls = 16, 0, []
    counts = {1: 2, 3: 6, 4: 4, 5: 5, 6: 2, 7: 4, 8: 1, 9: 2}  # varints after the tag (INSNS apart)
    while pos < len(data):
        tag = data[pos]
        pos += 1
        if tag == 2:
            dt, pos = leb(data, pos)
            n, pos = leb(data, pos)
            time += zigzag(dt)
            for _ in range(n):
                _, pos = leb(data, pos)
            continue
        if tag not in counts:
            sys.exit(f'{path}: unknown record tag {tag} at {pos - 1}')
        fields = []
        for _ in range(counts[tag]):
            v, pos = leb(data, pos)
            fields.append(v)
        if tag == 1:
            continue
        time += zigzag(fields[0])
        if tag == 3:
            calls.append((time, fields[2]))
    return calls


def perf_calls(work, perf_data):
    out = subprocess.run(['perf', '--buildid-dir', perf_data + '.buildid', 'script', '-i', perf_data,
                          '--itrace=b', '-F', 'time,ip,addr,flags,sym', '--ns'],
                         capture_output=True, text=True)
    calls = []
    for line in out.stdout.splitlines():
        m = re.match(r'\s*(\d+)\.(\d+):\s+call\s+([0-9a-f]+)\s+\S+\s+=>\s+([0-9a-f]+)\s+(\S+)', line)
        if m:
            ns = int(m.group(1)) * 1_000_000_000 + int(m.group(2))
            calls.append((ns, int(m.group(4), 16), m.group(5).split('@')[0].split('+')[0]))
    return calls, out.stderr


def our_begins(ptd, trace, work):
    ftf = os.path.join(work, 'ours.ftf')
    subprocess.run([ptd, 'decode', trace, '-o', ftf], check=True, capture_output=True)
    dump = subprocess.run([ptd, 'ftf-dump', ftf], check=True, capture_output=True, text=True).stdout
    begins = []
    for line in dump.splitlines():
        m = re.search(r'begin ts=(\d+) .*name="([^"]*)"', line)
        if m and '"inlined"' not in line and not m.group(2).startswith('['):
            begins.append((int(m.group(1)), m.group(2)))
    return begins


def stats(diffs, mtc_ns):
    if not diffs:
        return '| – | – | – | – |'
    a = sorted(abs(d) for d in diffs)
    p = lambda q: a[min(len(a) - 1, int(q * len(a)))]
    return (f'| {len(a)} | {p(0.5)} ns ({p(0.5) / mtc_ns:.4f}) | {p(0.99)} ns ({p(0.99) / mtc_ns:.4f}) '
            f'| {a[-1]} ns ({a[-1] / mtc_ns:.4f}) |')


SKIPPED = 77  # ctest's SKIP_RETURN_CODE


def check(ptd, program, work):
    """Records `program` with its ground truth, compares, and checks the bounds."""
    if shutil.which('perf') is None:
        print('SKIP: no `perf` on PATH')
        return SKIPPED
    os.makedirs(work, exist_ok=True)
    trace = os.path.join(work, 'trace')
    truth = os.path.join(work, 'truth.bin')
    subprocess.run([ptd, 'record', '--emulate=ptrace', '-q', '--force', '--ground-truth', truth, '-o', trace, '--',
                    program], check=True)
    result = compare(ptd, trace, truth, work)
    if result is None:
        return SKIPPED
    mtc_ns, rows = result
    ours_truth, perf_truth = rows['ours − truth'], rows['perf − truth']
    failed = []
    if not ours_truth or not perf_truth:
        failed.append('no calls matched')
    else:
        median = sorted(abs(d) for d in ours_truth)[len(ours_truth) // 2]
        if median > 1:
            failed.append(f'the median of |ours − truth| is {median} ns (bound 1 ns)')
        for name, d in (('ours − truth', ours_truth), ('perf − truth', perf_truth)):
            if max(abs(x) for x in d) >= mtc_ns:
                failed.append(f'{name} reaches {max(abs(x) for x in d)} ns (bound one MTC period, {mtc_ns:.0f} ns)')
    for f in failed:
        print('FAIL: ' + f)
    return 1 if failed else 0


def main():
    if sys.argv[1:2] == ['--check']:
        sys.exit(check(*sys.argv[2:5]))
    ptd, trace, truth_path, work = sys.argv[1:5]
    compare(ptd, trace, truth_path, work)


def compare(ptd, trace, truth_path, work):
    """Prints the table; returns (MTC period in ns, differences by row), None when perf decoded nothing."""
    meta = json.load(open(os.path.join(trace, 'meta.json')))
    pt = meta['pt']
    mtc_ns = (1 << pt['mtc_freq']) * pt['tsc_art_ratio_num'] / pt['tsc_art_ratio_den']
    perf_data = os.path.join(work, 'perf.data')
    subprocess.run([ptd, 'export', 'perf', trace, '-o', perf_data, '--force'], check=False, capture_output=True)
    if not os.path.exists(perf_data):
        subprocess.run([ptd, 'export', 'perf', trace, '-o', perf_data], check=True, capture_output=True)
    pcalls, perr = perf_calls(work, perf_data)
    if not pcalls:
        print(f'SKIP: perf decoded no calls from {perf_data}: {perr.strip()[:300]}')
        return None
    tcalls = truth_calls(truth_path)
    ours = our_begins(ptd, trace, work)
    # perf <-> truth: the same calls by target address, in order.
    pt_pairs = {}
    sm = difflib.SequenceMatcher(None, [c[1] for c in pcalls], [c[1] for c in tcalls], autojunk=False)
    for blk in sm.get_matching_blocks():
        for k in range(blk.size):
            pt_pairs[blk.a + k] = blk.b + k
    # ours <-> perf: slice begins by function name, in order.
    op_pairs = {}
    sm = difflib.SequenceMatcher(None, [o[1] for o in ours], [c[2] for c in pcalls], autojunk=False)
    for blk in sm.get_matching_blocks():
        for k in range(blk.size):
            op_pairs[blk.a + k] = blk.b + k
    ours_perf = [ours[i][0] - pcalls[j][0] for i, j in op_pairs.items()]
    perf_truth = [pcalls[j][0] - tcalls[k][0] for j, k in pt_pairs.items()]
    ours_truth = [ours[i][0] - tcalls[pt_pairs[j]][0] for i, j in op_pairs.items() if j in pt_pairs]
    print(f'{len(pcalls)} calls by perf, {len(tcalls)} in the truth, {len(ours)} slices of ours; '
          f'MTC period {mtc_ns:.0f} ns')
    print('| difference | calls matched | p50 of abs (MTC periods) | p99 | max |')
    print('|---|---|---|---|---|')
    rows = (('ours − perf', ours_perf), ('ours − truth', ours_truth), ('perf − truth', perf_truth))
    for name, d in rows:
        print(f'| {name} ' + stats(d, mtc_ns))
    for name, d in rows:
        if d:
            print(f'{name}, signed: min {min(d)} ns, max {max(d)} ns')
    return mtc_ns, dict(rows)


if __name__ == '__main__':
    main()
