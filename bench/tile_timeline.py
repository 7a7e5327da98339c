"""Tiles an hvd timeline: the run's events repeated COPIES times, each copy
after the last (timestamps shifted by the run's length), as if the same
steps had gone on that much longer.  Row names and hvd's metadata are
written once, the closing hvd_end last.  For bench/report-speed.

    /usr/bin/python3 bench/tile_timeline.py IN OUT COPIES
"""
import json
import sys


def main(src, dst, copies):
    with open(src) as f:
        events = json.load(f)
    meta = [e for e in events if e.get("ph") == "M" and e.get("name") != "hvd_end"]
    timed = [e for e in events if e.get("ph") != "M"]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) + 1000
    with open(dst, "w") as out:
        out.write("[\n")
        for e in meta:
            out.write(json.dumps(e, separators=(",", ":")) + ",\n")
        for k in range(copies):
            for e in timed:
                out.write(json.dumps(dict(e, ts=e["ts"] + k * span), separators=(",", ":")) + ",\n")
        out.write('{"name":"hvd_end","ph":"M","pid":0,"args":{"ts":%d}}\n]\n' % (copies * span))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
