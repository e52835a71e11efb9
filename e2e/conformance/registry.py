#!/usr/bin/env python3
"""A read-only registry (OCI distribution API, pull side) serving the docker-archive tarballs of a
directory, so that imagePullPolicy: Always pulls work on a cluster with no way out.

usage: registry.py LISTEN_ADDR:PORT IMAGES_DIR

run.sh makes it the nodes' mirror of registry.k8s.io: upstream's e2e tests pull their images from
there, some with imagePullPolicy Always (Projected PodCertificate mTLS), and the kubelet must then
really pull — a local copy does not do. Manifests are made from each tarball's manifest.json (what
mkimage.py or `docker save` writes); the config and the (uncompressed) layers are served as blobs
straight from the tarball, so the digests are those of the images run.sh imports and a pull
fetches only the manifest. Tarballs are read at start.
"""
import hashlib, http.server, json, os, re, sys, tarfile

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"

manifests = {}  # "registry/repo:tag" and "registry/repo@digest" -> (digest, bytes)
blobs = {}      # "sha256:<hex>" -> (tarball path, offset, size)


def sha256_of(path, offset, size):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(offset)
        left = size
        while left:
            b = f.read(min(left, 1 << 20))
            if not b:
                break
            h.update(b)
            left -= len(b)
    return "sha256:" + h.hexdigest()


def load(path):
    with tarfile.open(path) as tf:
        members = {m.name.rstrip("/"): m for m in tf.getmembers()}
        index = json.load(tf.extractfile(members["manifest.json"]))
    for img in index:
        descs = []
        for name, media in [(img["Config"], CONFIG)] + [(l, LAYER) for l in img["Layers"]]:
            m = members[name]
            # docker save names blobs by digest; hash anyway: the name is not a promise
            digest = sha256_of(path, m.offset_data, m.size)
            blobs[digest] = (path, m.offset_data, m.size)
            descs.append({"mediaType": media, "digest": digest, "size": m.size})
        body = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST, "config": descs[0],
                           "layers": descs[1:]}, sort_keys=True).encode()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        entry = (digest, body)
        for tag in img.get("RepoTags") or []:
            repo, _, t = tag.rpartition(":")
            manifests[tag] = entry
            manifests[repo + "@" + digest] = entry
            print("serving", tag, digest, flush=True)


def lookup(registry, repo, ref):
    sep = "@" if ref.startswith("sha256:") else ":"
    if registry:
        return manifests.get(registry + "/" + repo + sep + ref)
    # no ?ns=: any registry's image of that repository
    for key, v in manifests.items():
        if key.endswith("/" + repo + sep + ref):
            return v
    return None


ROUTE = re.compile(r"^/v2/(?P<repo>.+)/(?P<kind>manifests|blobs)/(?P<ref>[^/]+)$")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def send(self, code, ctype="application/json", body=b"", length=None, digest=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        if digest:
            self.send_header("Docker-Content-Digest", digest)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def not_found(self, what):
        body = json.dumps({"errors": [{"code": what, "message": self.path}]}).encode()
        self.send(404, body=body)

    def do_GET(self):
        path, _, query = self.path.partition("?")
        ns = dict(p.partition("=")[::2] for p in query.split("&") if p).get("ns", "")
        if path in ("/v2", "/v2/"):
            return self.send(200, body=b"{}")
        m = ROUTE.match(path)
        if not m:
            return self.not_found("UNSUPPORTED")
        if m["kind"] == "manifests":
            found = lookup(ns, m["repo"], m["ref"])
            if not found:
                return self.not_found("MANIFEST_UNKNOWN")
            digest, body = found
            return self.send(200, MANIFEST, body, digest=digest)
        blob = blobs.get(m["ref"])
        if not blob:
            return self.not_found("BLOB_UNKNOWN")
        tar, offset, size = blob
        self.send(200, "application/octet-stream", length=size, digest=m["ref"])
        if self.command == "HEAD":
            return
        with open(tar, "rb") as f:
            f.seek(offset)
            left = size
            while left:
                b = f.read(min(left, 1 << 20))
                if not b:
                    break
                self.wfile.write(b)
                left -= len(b)

    do_HEAD = do_GET

    def log_message(self, fmt, *args):
        sys.stdout.write("%s %s\n" % (self.address_string(), fmt % args))
        sys.stdout.flush()


def main():
    addr, images = sys.argv[1], sys.argv[2]
    for name in sorted(os.listdir(images)):
        if name.endswith(".tar"):
            try:
                load(os.path.join(images, name))
            except (KeyError, tarfile.TarError, ValueError) as e:
                print("skip", name, e, flush=True)
    host, _, port = addr.rpartition(":")
    http.server.ThreadingHTTPServer((host, int(port)), Handler).serve_forever()


if __name__ == "__main__":
    main()
