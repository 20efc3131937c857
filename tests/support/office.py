"""Office documents built for tests: real files that python-pptx writes, grown cheaply."""

from __future__ import annotations

import io
import zipfile


def pptx_deck(slides: int) -> bytes:
    """A real PPTX of ``slides`` titled slides ("Slide 1", ...): python-pptx makes one, and
    its parts are copied for the others (python-pptx alone takes a minute for 5,000)."""
    from pptx import Presentation

    one = Presentation()
    one.slides.add_slide(one.slide_layouts[5]).shapes.title.text = "Slide 1"
    buf = io.BytesIO()
    one.save(buf)
    with zipfile.ZipFile(buf) as z:
        parts = {name: z.read(name) for name in z.namelist()}
    slide, rels = parts["ppt/slides/slide1.xml"], parts["ppt/slides/_rels/slide1.xml.rels"]
    kind = "application/vnd.openxmlformats-officedocument.presentationml.slide+xml"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide"
    types, links, ids = [], [], []
    for n in range(2, slides + 1):
        parts[f"ppt/slides/slide{n}.xml"] = slide.replace(b">Slide 1<", f">Slide {n}<".encode())
        parts[f"ppt/slides/_rels/slide{n}.xml.rels"] = rels
        types.append(f'<Override PartName="/ppt/slides/slide{n}.xml" ContentType="{kind}"/>')
        links.append(f'<Relationship Id="rIdS{n}" Type="{rel}" Target="slides/slide{n}.xml"/>')
        ids.append(f'<p:sldId id="{255 + n}" r:id="rIdS{n}"/>')

    def insert(name: str, before: str, added: list[str]) -> None:
        end = before.encode()
        parts[name] = parts[name].replace(end, "".join(added).encode() + end)

    insert("[Content_Types].xml", "</Types>", types)
    insert("ppt/_rels/presentation.xml.rels", "</Relationships>", links)
    insert("ppt/presentation.xml", "</p:sldIdLst>", ids)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            z.writestr(name, data)
    return out.getvalue()
