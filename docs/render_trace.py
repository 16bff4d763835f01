"""Render a Chrome trace (what ``df.timeline`` and ``dataflow profile`` write) to a PNG.

No plotting library is needed: slices, arrows and text are drawn into an RGB buffer
here, text with the glyph outlines of a TrueType font (DejaVu Sans by default), and
the buffer is written as a PNG with zlib. It draws what Perfetto shows: one row per
thread, grouped by process (device), a box per slice labelled with its name, the
waiting spans of Recvs as thin bars, and a flow arrow from each Send to its Recv.

    python docs/render_trace.py trace.json docs/timeline.png [--width 1600]
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import zlib

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


# -- a TrueType outline reader (simple glyphs, cmap format 4) -----------------------------------
class Font:
    def __init__(self, path=FONT):
        with open(path, "rb") as f:
            self.data = d = f.read()
        n = struct.unpack_from(">H", d, 4)[0]
        self.tables = {d[12 + 16 * i:16 + 16 * i].decode("latin-1"):
                       struct.unpack_from(">I", d, 20 + 16 * i)[0] for i in range(n)}
        head = self.tables["head"]
        self.units = struct.unpack_from(">H", d, head + 18)[0]
        self.long_loca = struct.unpack_from(">h", d, head + 50)[0] == 1
        hhea = self.tables["hhea"]
        self.ascent = struct.unpack_from(">h", d, hhea + 4)[0]
        self.num_metrics = struct.unpack_from(">H", d, hhea + 34)[0]
        self.cmap = self._cmap()
        self.cache = {}

    def _cmap(self) -> dict:
        d, base = self.data, self.tables["cmap"]
        for i in range(struct.unpack_from(">H", d, base + 2)[0]):
            platform, encoding, off = struct.unpack_from(">HHI", d, base + 4 + 8 * i)
            if (platform, encoding) == (3, 1):
                return self._format4(base + off)
        raise ValueError("no Unicode BMP cmap")

    def _format4(self, at) -> dict:
        d = self.data
        segs = struct.unpack_from(">H", d, at + 6)[0] // 2
        ends = struct.unpack_from(f">{segs}H", d, at + 14)
        starts = struct.unpack_from(f">{segs}H", d, at + 16 + 2 * segs)
        deltas = struct.unpack_from(f">{segs}h", d, at + 16 + 4 * segs)
        ro_at = at + 16 + 6 * segs
        offsets = struct.unpack_from(f">{segs}H", d, ro_at)
        out = {}
        for s in range(segs):
            for c in range(starts[s], min(ends[s], 0x2FF) + 1):
                if offsets[s] == 0:
                    g = (c + deltas[s]) & 0xFFFF
                else:
                    p = ro_at + 2 * s + offsets[s] + 2 * (c - starts[s])
                    g = struct.unpack_from(">H", d, p)[0]
                    g = (g + deltas[s]) & 0xFFFF if g else 0
                out[chr(c)] = g
        return out

    def advance(self, g) -> int:
        hmtx = self.tables["hmtx"]
        return struct.unpack_from(">H", self.data, hmtx + 4 * min(g, self.num_metrics - 1))[0]

    def contours(self, g) -> list:
        """The glyph's closed contours as lists of (x, y, on_curve) in font units."""
        d, loca = self.data, self.tables["loca"]
        if self.long_loca:
            a, b = struct.unpack_from(">II", d, loca + 4 * g)
        else:
            a, b = (2 * v for v in struct.unpack_from(">HH", d, loca + 2 * g))
        if a == b:
            return []
        at = self.tables["glyf"] + a
        n = struct.unpack_from(">h", d, at)[0]
        if n < 0:
            return []   # composite glyphs (accented letters) are not needed here
        ends = struct.unpack_from(f">{n}H", d, at + 10)
        count = ends[-1] + 1 if n else 0
        p = at + 10 + 2 * n
        p += 2 + struct.unpack_from(">H", d, p)[0]
        flags = []
        while len(flags) < count:
            f = d[p]
            p += 1
            flags.append(f)
            if f & 8:
                flags.extend([f] * d[p])
                p += 1
        coords = []
        for short, same in ((2, 16), (4, 32)):   # x then y
            v, vals = 0, []
            for f in flags:
                if f & short:
                    delta = d[p]
                    p += 1
                    v += delta if f & same else -delta
                elif not f & same:
                    v += struct.unpack_from(">h", d, p)[0]
                    p += 2
                vals.append(v)
            coords.append(vals)
        out, start = [], 0
        for e in ends:
            out.append([(coords[0][i], coords[1][i], flags[i] & 1) for i in range(start, e + 1)])
            start = e + 1
        return out


def _flatten(contour, steps=4) -> list:
    """A contour of on/off-curve points as a closed polyline (quadratic Beziers split)."""
    pts = contour
    if not pts:
        return []
    if not pts[0][2]:   # start on an on-curve point (or an implied one)
        if pts[-1][2]:
            pts = pts[-1:] + pts[:-1]
        else:
            mid = ((pts[0][0] + pts[-1][0]) / 2, (pts[0][1] + pts[-1][1]) / 2, 1)
            pts = [mid] + pts
    out = [(pts[0][0], pts[0][1])]
    i, n = 1, len(pts)
    cur = pts[0]
    while i <= n:
        p = pts[i % n]
        if p[2]:
            out.append((p[0], p[1]))
            cur = p
            i += 1
            continue
        nxt = pts[(i + 1) % n]
        end = nxt if nxt[2] else ((p[0] + nxt[0]) / 2, (p[1] + nxt[1]) / 2, 1)
        for k in range(1, steps + 1):
            t = k / steps
            out.append(((1 - t) ** 2 * cur[0] + 2 * (1 - t) * t * p[0] + t * t * end[0],
                        (1 - t) ** 2 * cur[1] + 2 * (1 - t) * t * p[1] + t * t * end[1]))
        cur = end
        i += 2 if nxt[2] else 1
    return out


# -- a raster canvas --------------------------------------------------------------------------
class Canvas:
    def __init__(self, width, height, background=(255, 255, 255)):
        self.w, self.h = width, height
        self.px = bytearray(bytes(background) * (width * height))

    def blend(self, x, y, color, alpha=1.0):
        if 0 <= x < self.w and 0 <= y < self.h and alpha > 0:
            i = 3 * (y * self.w + x)
            px = self.px
            for c in range(3):
                px[i + c] = int(px[i + c] * (1 - alpha) + color[c] * alpha)

    def rect(self, x0, y0, x1, y1, color):
        x0, x1 = max(0, int(x0)), min(self.w, int(round(x1)))
        y0, y1 = max(0, int(y0)), min(self.h, int(y1))
        if x1 <= x0:
            x1 = min(self.w, x0 + 1)
        row = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            i = 3 * (y * self.w + x0)
            self.px[i:i + len(row)] = row

    def line(self, x0, y0, x1, y1, color, alpha=1.0):
        n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for k in range(n + 1):
            t = k / n
            self.blend(int(x0 + (x1 - x0) * t), int(y0 + (y1 - y0) * t), color, alpha)

    def text(self, font, x, y, s, size, color=(0, 0, 0), max_width=None):
        """Draw ``s`` with its baseline at ``y``; returns the width drawn (0 without a
        font)."""
        if font is None:
            return 0
        scale = size / font.units
        pen = 0.0
        for ch in s:
            g = font.cmap.get(ch, 0)
            adv = font.advance(g) * scale
            if max_width is not None and pen + adv > max_width:
                break
            bitmap = self._glyph(font, g, size)
            if bitmap is not None:
                gx, gy, gw, gh, cov = bitmap
                ox = int(x + pen) + gx
                for j in range(gh):
                    for i in range(gw):
                        a = cov[j * gw + i]
                        if a:
                            self.blend(ox + i, y + gy + j, color, a)
            pen += adv
        return pen

    @staticmethod
    def _glyph(font, g, size, ss=4):
        """Coverage (0..1) of glyph ``g`` at ``size`` px: scanlines at ss x ss samples,
        nonzero winding."""
        key = (g, size)
        if key in font.cache:
            return font.cache[key]
        scale = size / font.units * ss
        polys = [[(x * scale, -y * scale) for x, y in _flatten(c)] for c in font.contours(g)]
        polys = [p for p in polys if len(p) > 2]
        if not polys:
            font.cache[key] = None
            return None
        xs = [x for p in polys for x, _ in p]
        ys = [y for p in polys for _, y in p]
        x0, y0 = int(min(xs)) // ss * ss - ss, int(min(ys)) // ss * ss - ss
        w = (int(max(xs)) - x0) // ss + 2
        h = (int(max(ys)) - y0) // ss + 2
        cov = [0.0] * (w * h)
        edges = [(a, b) for p in polys for a, b in zip(p, p[1:] + p[:1]) if a[1] != b[1]]
        for sy in range(h * ss):
            yc = y0 + sy + 0.5
            cross = []
            for (ax, ay), (bx, by) in edges:
                if (ay <= yc < by) or (by <= yc < ay):
                    cross.append((ax + (yc - ay) * (bx - ax) / (by - ay), 1 if by > ay else -1))
            cross.sort()
            wind, row = 0, (sy // ss) * w
            for k in range(len(cross) - 1):
                wind += cross[k][1]
                if wind:
                    xa, xb = cross[k][0] - x0, cross[k + 1][0] - x0
                    for sx in range(max(0, int(xa)), min(w * ss, int(xb) + 1)):
                        if xa <= sx + 0.5 < xb:
                            cov[row + sx // ss] += 1.0 / (ss * ss)
        out = (x0 // ss, y0 // ss, w, h, [min(1.0, c) for c in cov])
        font.cache[key] = out
        return out

    def png(self, path):
        raw = b"".join(b"\0" + bytes(self.px[3 * y * self.w:3 * (y + 1) * self.w])
                       for y in range(self.h))

        def chunk(kind, data):
            return (struct.pack(">I", len(data)) + kind + data
                    + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(
                ">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(
                    raw, 9)) + chunk(b"IEND", b""))


# -- the trace layout -----------------------------------------------------------------------------
PALETTE = [(66, 133, 244), (52, 168, 83), (251, 188, 5), (234, 67, 53), (171, 71, 188),
           (0, 172, 193), (255, 112, 67), (158, 157, 36), (92, 107, 192), (240, 98, 146)]
ROLE_COLORS = {"_Send": (255, 143, 0), "_Recv": (0, 137, 123)}
DEAD = (200, 200, 200)


def _color(op):
    if op in ROLE_COLORS:
        return ROLE_COLORS[op]
    return PALETTE[sum(map(ord, op)) % len(PALETTE)]


def render(trace: dict, path: str, width=1600, title="", font=None):
    """Draw ``trace`` (a Chrome trace dict) into the PNG file ``path``. ``font`` is a
    :class:`Font`; without one, DejaVu Sans is used if installed, else no text is drawn."""
    if font is None and os.path.exists(FONT):
        font = Font()
    events = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["name"] == "thread_name"}
    slices = [e for e in events if e["ph"] == "X"]
    t0 = min(e["ts"] for e in slices)
    t1 = max(e["ts"] + e["dur"] for e in slices)
    label_w, top, row_h, gap = 330, 70, 34, 26
    rows, y = {}, top
    for pid in sorted(procs):
        y += gap
        for key in sorted(k for k in threads if k[0] == pid):
            rows[key] = y
            y += row_h + 18   # room under the row for the Recv waits
    height = y + 50
    c = Canvas(width, height)
    plot_w = width - label_w - 30

    def xpos(ts):
        return label_w + (ts - t0) / (t1 - t0) * plot_w

    c.text(font, 12, 30, title, 20)
    # time axis
    span = t1 - t0
    step = 10 ** len(str(int(span / 8))) / 10 if span > 8 else 1
    while span / step > 10:
        step *= 2
    k = 0
    while k * step <= span:
        x = int(xpos(t0 + k * step))
        c.rect(x, top - 8, x + 1, height - 30, (225, 225, 225))
        c.text(font, x - 10, top - 14, f"{k * step:g} µs", 12, (90, 90, 90))
        k += 1
    for pid in sorted(procs):
        first = min(v for (p, _), v in rows.items() if p == pid)
        c.text(font, 10, first - 8, procs[pid].replace(" Compute", ""), 14, (20, 20, 20))
        c.rect(10, first - 4, width - 10, first - 3, (160, 160, 160))
    for key, ry in rows.items():
        c.text(font, 22, ry + 22, threads[key], 13, (60, 60, 60), max_width=label_w - 30)
    for e in sorted(slices, key=lambda e: e["ts"]):
        ry = rows.get((e["pid"], e["tid"]))
        if ry is None:
            continue
        x0, x1 = xpos(e["ts"]), xpos(e["ts"] + e["dur"])
        dead = e["args"].get("dead")
        color = DEAD if dead else _color(e["args"].get("op", ""))
        c.rect(x0, ry, max(x1, x0 + 1), ry + row_h, color)
        if x1 - x0 > 40:
            c.text(font, int(x0) + 3, ry + 22, e["name"], 12,
                   (80, 80, 80) if dead else (255, 255, 255), max_width=x1 - x0 - 6)
    for e in events:   # Recv waits under their row
        if e["ph"] == "b":
            end = next(f for f in events if f["ph"] == "e" and f["id"] == e["id"])
            ry = rows[(e["pid"], e["tid"])] + row_h + 6
            c.rect(xpos(e["ts"]), ry, xpos(end["ts"]), ry + 4, (120, 190, 180))
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    for s in (e for e in events if e["ph"] == "s"):
        f = ends.get(s["id"])
        if f is None:
            continue
        xa, ya = xpos(s["ts"]), rows[(s["pid"], s["tid"])] + row_h / 2
        xb, yb = xpos(f["ts"]), rows[(f["pid"], f["tid"])] + row_h / 2
        c.line(xa, ya, xb, yb, (30, 30, 30), 0.8)
        dy = 1 if yb > ya else -1
        for k in range(7):   # arrowhead
            c.rect(xb - k, yb - dy * (k + 1) - 1, xb + k + 1, yb - dy * (k + 1), (30, 30, 30))
    c.text(font, label_w, height - 12, "grey: dead (untaken) · orange: _Send · teal: _Recv "
           "(thin bar: waiting) · arrows: Send to Recv", 12, (90, 90, 90))
    c.png(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--title", default="")
    args = ap.parse_args(argv)
    with open(args.trace) as f:
        render(json.load(f), args.png, args.width, args.title)


if __name__ == "__main__":
    main()
