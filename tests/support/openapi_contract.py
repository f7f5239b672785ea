"""schema/openapi.json as a contract that answers are checked against: the document's
operations by method and path template, each answer's status, headers, content type
and body validated (JSON Schema 2020-12, python3-jsonschema: both its RefResolver API,
Debian 12's 4.10, and the newer `referencing` registry), with the schemas the document
refers to outside itself (the run config's and the sweep's) resolved offline.

Used by integration/ops/test_openapi.py (every route of a real server) and by the tests
that bring about answers it cannot (a full disk, the gates between members).
checker() is the contract of this repository's schema/."""
import json, os, re, warnings

from checks import check

try:
    import jsonschema
except ImportError:  # the tests that need it count it as a failure
    jsonschema = None

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schema")
BASE = "http://ddpd.invalid/"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
# The references outside the document: relative, so that they resolve offline (the
# files beside schema/openapi.json) and online (ddpd serves them beside /openapi.json).
RUN_CONFIG_REF = "run-config.schema.json"
SWEEP_REF = "sweep.schema.json"
OUTSIDE_REFS = {RUN_CONFIG_REF: "RunConfig", SWEEP_REF: "SweepSpec"}  # the file, the component that refers to it


def outside_schemas(schema_dir):
    """{file name: its schema} for each schema the document refers to outside itself."""
    out = {}
    for name in OUTSIDE_REFS:
        with open(os.path.join(schema_dir, name)) as f:
            out[name] = json.load(f)
    return out


def pointer_escape(s):
    return s.replace("~", "~0").replace("/", "~1")


def resolve_pointer(doc, pointer):
    node = doc
    for part in pointer.lstrip("/").split("/") if pointer not in ("", "/") else []:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def deref(doc, obj, where):
    """An OpenAPI object that may be {"$ref": "#/..."}: (the object, its JSON pointer)."""
    while isinstance(obj, dict) and "$ref" in obj:
        ref = obj["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"{where}: only local references here: {ref}")
        where = ref[1:]
        obj = resolve_pointer(doc, where)
    return obj, where


def normalize(template):
    return re.sub(r"\{[^}]*\}", "{}", template.rstrip("/") or "/")


class Validator:
    """Validates instances against schemas at JSON pointers of the document."""

    def __init__(self, doc, outside):
        """outside: {file name: schema} of the documents the relative references name."""
        urls = {BASE + name: schema for name, schema in outside.items()}  # where each resolves from BASE/openapi.json
        try:
            from referencing import Registry, Resource
            from referencing.jsonschema import DRAFT202012
            resources = [(BASE + "openapi.json", Resource(contents=doc, specification=DRAFT202012))]
            for url, schema in urls.items():
                resource = Resource.from_contents(schema, default_specification=DRAFT202012)
                resources.append((url, resource))
                if "$id" in schema:
                    resources.append((schema["$id"], resource))
            registry = Registry().with_resources(resources)
            self.make = lambda uri: jsonschema.Draft202012Validator({"$ref": uri}, registry=registry)
        except ImportError:
            # RefResolver (jsonschema 4.10) cannot resolve "#/..." against a urn: $id:
            # each schema is stored without it, under the URL ddpd serves it at.
            store = {BASE + "openapi.json": doc}
            store.update({url: {k: v for k, v in schema.items() if k != "$id"} for url, schema in urls.items()})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                resolver = jsonschema.RefResolver(BASE + "openapi.json", doc, store=store)
            self.make = lambda uri: jsonschema.Draft202012Validator({"$ref": uri}, resolver=resolver)

    def errors(self, pointer, instance):
        v = self.make(BASE + "openapi.json#" + pointer)
        return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in v.iter_errors(instance)][:5]


class Checker:
    def __init__(self, doc, validator):
        self.doc, self.v = doc, validator
        self.ops = {}  # (method, normalized path) -> (template, operation, pointer)
        for template, item in doc["paths"].items():
            for m in METHODS:
                if m in item:
                    self.ops[(m, normalize(template))] = (template, item[m], f"/paths/{pointer_escape(template)}/{m}")
        self.seen = set()  # (method, template, status)

    def response(self, method, template, r, what):
        """Checks one answer against the operation's documented responses."""
        key = (method.lower(), normalize(template))
        if not check(key in self.ops, f"{what}: {method} {template} is documented"):
            return
        tpl, op, op_ptr = self.ops[key]
        status = str(r.status)
        self.seen.add((method.lower(), tpl, status))
        responses = op.get("responses", {})
        if not check(status in responses, f"{what}: status {status} is documented for {method} {tpl} "
                                          f"(documented: {sorted(responses)}): {r.body[:200]!r}"):
            return
        resp, resp_ptr = deref(self.doc, responses[status], f"{op_ptr}/responses/{status}")
        for name, h in resp.get("headers", {}).items():
            h, _ = deref(self.doc, h, "header")
            value = r.header(name)
            if h.get("required"):
                check(value is not None, f"{what}: the {name} header is there")
            if value is not None and "pattern" in h.get("schema", {}):
                check(re.search(h["schema"]["pattern"], value) is not None, f"{what}: {name}: {value!r} matches")
        content = resp.get("content")
        ctype = (r.header("Content-Type") or "").split(";")[0].strip().lower()
        if not content:
            check(r.body == b"", f"{what}: no body documented, none sent: {r.body[:100]!r}")
            return
        media = None
        for m in content:
            if m == ctype or m == "*/*" or (m.endswith("/*") and ctype.startswith(m[:-1])):
                media = m
                break
        if not check(media is not None, f"{what}: Content-Type {ctype!r} is one documented: {sorted(content)}"):
            return
        schema_ptr = f"{resp_ptr}/content/{pointer_escape(media)}/schema"
        if media.endswith("json"):
            try:
                body = json.loads(r.body)
            except ValueError as e:
                check(False, f"{what}: the body is JSON: {e}: {r.body[:200]!r}")
                return
        else:
            body = r.body.decode("utf-8", errors="replace")
        errs = self.v.errors(schema_ptr, body)
        check(not errs, f"{what}: {status} {media} body matches {schema_ptr}: {errs}: {r.body[:300]!r}")


def checker(schema_dir=SCHEMA_DIR):
    """A Checker of answers against schema_dir's openapi.json."""
    with open(os.path.join(schema_dir, "openapi.json")) as f:
        doc = json.load(f)
    return Checker(doc, Validator(doc, outside_schemas(schema_dir)))
