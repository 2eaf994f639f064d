#!/usr/bin/env python3
"""Deterministic .tar.gz files: entries in name order, every time at one epoch, owned by 0:0
with no owner names, gzip without a file name or time.

  tgz.py repack IN.tgz OUT.tgz --epoch N   the same entries (`helm package` stamps the clock
                                           into every entry and the gzip header)
  tgz.py pack DIR OUT.tgz --epoch N NAME...  the named files of DIR, modes kept
Stdlib only.
"""
import argparse
import gzip
import io
import os
import sys
import tarfile


def write(members, out_path, epoch):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for info, data in sorted(members, key=lambda m: m[0].name):
            info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
            info.pax_headers = {}
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    with open(out_path, "wb") as f:
        f.write(gzip.compress(buf.getvalue(), compresslevel=9, mtime=0))


def repack(a):
    members = []
    with tarfile.open(a.input, "r:gz") as t:
        for m in t.getmembers():
            members.append((m, t.extractfile(m).read() if m.isreg() else None))
    write(members, a.output, a.epoch)


def pack(a):
    members = []
    for name in a.names:
        path = os.path.join(a.input, name)
        info = tarfile.TarInfo(name)
        st = os.stat(path)
        info.mode = st.st_mode & 0o777
        with open(path, "rb") as f:
            data = f.read()
        info.size = len(data)
        members.append((info, data))
    write(members, a.output, a.epoch)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["repack", "pack"])
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("names", nargs="*")
    p.add_argument("--epoch", type=int, required=True)
    a = p.parse_intermixed_args()
    (repack if a.mode == "repack" else pack)(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
