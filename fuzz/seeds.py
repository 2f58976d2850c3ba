#!/usr/bin/env python3
"""Writes the fuzzing seed corpora to fuzz/corpus/<target>/ (not committed; scripts/fuzz.sh
runs it before fuzzing).

Sources: the committed hand-written seeds in fuzz/seeds/<target>/, the schema and object
fixtures of services/validation/tests/fixtures/, and, when present on this machine, the
openAPIV3Schema of every CRD version in the CRD corpus: $CRDPLANE_CRD_CORPUS, else
shared/crd-corpus beside the clone, as the corpus test finds it (read from there, never copied
into the repository; skipped when absent or when PyYAML is missing).
"""
import hashlib
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "corpus")
CRD_CORPUS = os.environ.get(
    "CRDPLANE_CRD_CORPUS", os.path.join(os.path.dirname(ROOT), "shared", "crd-corpus")
)


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fixtures():
    d = os.path.join(ROOT, "services/validation/tests/fixtures")
    for fn in sorted(os.listdir(d)):
        with open(os.path.join(d, fn)) as f:
            doc = json.load(f)
        cases = doc if isinstance(doc, list) else [doc]
        for c in cases:
            if not isinstance(c, dict):
                continue
            for k in ("schema", "openAPIV3Schema"):
                if isinstance(c.get(k), dict):
                    put("schema_compile", json.dumps(c[k]))
            for k in ("object", "obj", "input"):
                if isinstance(c.get(k), dict):
                    body = json.dumps(c[k])
                    put("body_decode", b"\x00" + body.encode())
                    put("json_patch", body + "\x00" + '[{"op":"add","path":"/a","value":1}]')
                    put("strategic_merge", body + "\x00" + '{"metadata":{"labels":{"a":null}}}')
            if c.get("spec", {}).get("versions") if isinstance(c.get("spec"), dict) else False:
                for v in c["spec"]["versions"]:
                    s = (v.get("schema") or {}).get("openAPIV3Schema")
                    if isinstance(s, dict):
                        put("schema_compile", json.dumps(s))


def crd_corpus():
    if not os.path.isdir(CRD_CORPUS):
        print(f"seeds: {CRD_CORPUS} absent, skipped", file=sys.stderr)
        return
    try:
        import yaml
    except ImportError:
        print("seeds: PyYAML missing, crd-corpus skipped", file=sys.stderr)
        return
    marker = os.path.join(OUT, ".crd-corpus-read")
    if os.path.exists(marker):
        return
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    n = 0
    for dirpath, _, files in os.walk(CRD_CORPUS):
        for fn in sorted(files):
            if not fn.endswith((".yaml", ".yml")):
                continue
            path = os.path.join(dirpath, fn)
            try:
                with open(path, "rb") as f:
                    raw = f.read()
                docs = list(yaml.load_all(raw, Loader=loader))
            except Exception:
                continue
            if len(raw) < 64 * 1024:
                put("body_decode", b"\x01" + raw)
            for doc in docs:
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                for v in (doc.get("spec") or {}).get("versions") or []:
                    s = (v.get("schema") or {}).get("openAPIV3Schema")
                    if isinstance(s, dict):
                        put("schema_compile", json.dumps(s, default=str))
                        n += 1
    print(f"seeds: {n} schemas from {CRD_CORPUS}", file=sys.stderr)
    open(marker, "w").close()


def main():
    seeds = os.path.join(HERE, "seeds")
    for t in sorted(os.listdir(seeds)):
        for fn in sorted(os.listdir(os.path.join(seeds, t))):
            with open(os.path.join(seeds, t, fn), "rb") as f:
                put(t, f.read())
    fixtures()
    crd_corpus()


if __name__ == "__main__":
    main()
