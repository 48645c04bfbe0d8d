#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks harp's Helm chart, its example workloads and the container files, with no cluster.

  check_chart.py --repo ROOT               what needs no Helm: schema, templates, examples, images
  check_chart.py --repo ROOT --helm HELM   Helm itself: lint, render, NOTES, schema rejections

The first mode checks values.schema.json against values.yaml and each helm/examples/values-*.yaml
(merged over the defaults as Helm merges them) and makes sure each file in tests/deploy/bad-values/
is rejected for the one field it names; reads the templates for balanced actions and blocks, .Values
paths that exist and values that are used; checks the plain example manifests; and reads the
Dockerfiles. The second mode renders the chart with Helm and puts the output through the same
manifest checks plus the DaemonSet's contract with the values.

Manifests are checked twice over: field by field against the Kubernetes API models generated into
python3-kubernetes (unknown fields, types, required fields), then against the rules Kubernetes'
own validation applies to what we use and harp's rules for the agent and for training pods. The
Kubeflow kinds (MPIJob, PyTorchJob, TrainJob, ClusterTrainingRuntime) have no models there: their
own fields are listed here from the projects' API types, the Jobs and pods inside them go through
the models. A TrainJob is judged as the pod Trainer makes of it and its runtime.
Prints one line per check and ends with "N passed, M failed"; exits 1 if anything failed.
"""

import argparse
import copy
import decimal
import functools
import glob
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import jsonschema
    import yaml
    from kubernetes.client import models as k8s_models
except ImportError as e:
    # Not a skip: scripts/setup.sh installs these, so a machine without them is set up wrong.
    sys.exit(f"check_chart.py: {e}; install python3-yaml, python3-jsonschema and "
             "python3-kubernetes (scripts/setup.sh does) and run with Debian's /usr/bin/python3")

HARP_ATTACH = "/opt/harp/sbin/harp-attach"
HARP_PLUGIN = "/opt/harp/lib/libnccl-net-harp.so"
# Where libharp looks for the node agent's socket (HARP_AGENT_SOCKET's default).
AGENT_DIR = "/run/harp"
# Training pods may have these beyond NET_RAW and IPC_LOCK only when the container runs sshd (the
# MPI operator's workers): as root, sshd chroots its pre-auth child and switches users and groups.
SSHD_CAPS = {"SYS_CHROOT", "SETUID", "SETGID"}
HARP_POD_CAPS = {"NET_RAW", "IPC_LOCK"}
FORBIDDEN_CAPS = {"ALL", "SYS_ADMIN", "NET_ADMIN", "BPF", "PERFMON", "SYS_MODULE", "SYS_PTRACE",
                  "SYS_RAWIO", "DAC_READ_SEARCH"}
LINUX_CAPS = {
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
    "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE", "ALL",
}
# The Kind -> model of the objects harp's files contain; CRDs are handled by hand below.
CORE_KINDS = {
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "ConfigMap"): "V1ConfigMap",
}
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
QUANTITY = re.compile(
    r"^([+-]?[0-9]+(\.[0-9]*)?|[+-]?\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$")
QUANTITY_SCALE = {"n": "1e-9", "u": "1e-6", "m": "1e-3", "": "1", "k": "1e3", "M": "1e6",
                  "G": "1e9", "T": "1e12", "P": "1e15", "E": "1e18", "Ki": "1024", "Mi": "1048576",
                  "Gi": "1073741824", "Ti": "1099511627776", "Pi": "1125899906842624",
                  "Ei": "1152921504606846976"}


class Report:
    """Counts checks; each prints one line, a failure with what was wrong."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, errors):
        errors = [e for e in errors if e]
        if errors:
            self.failed += 1
            print(f"FAIL {name}")
            for err in errors:
                print(f"     {err}")
        else:
            self.passed += 1
            print(f"ok   {name}")

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0


# --- YAML ----------------------------------------------------------------------------------------

class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping: YAML keeps the last one silently,
    which hides a template that emits a field twice."""


def _strict_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} given twice", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _strict_mapping)


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=StrictLoader)


def load_docs(text):
    return [d for d in yaml.load_all(text, Loader=StrictLoader) if d is not None]


def coalesce(base, override):
    """Merges a values file over the defaults the way Helm does: maps merge key by key, a null
    removes the key, anything else (lists included) replaces."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = coalesce(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# --- values.schema.json --------------------------------------------------------------------------

def schema_errors(schema, values):
    """[(path, message)] for every violation; the path is dotted ("interfaces.1"), "(root)" for
    the top level, the way Helm 3 names fields."""
    validator = jsonschema.Draft7Validator(schema)
    found = []
    for err in validator.iter_errors(values):
        path = ".".join(str(p) for p in err.absolute_path) or "(root)"
        found.append((path, err.message))
    return sorted(found)


def bad_values_expectation(path):
    """A bad-values file says what must be rejected in its '# expect: PATH [WORD]' line."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#\s*expect:\s*(\S+)(?:\s+(\S+))?\s*$", line)
            if m:
                return m.group(1), m.group(2)
    return None, None


def check_schema(rep, chart, examples, bad_dir):
    schema_path = os.path.join(chart, "values.schema.json")
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    defaults = load_yaml(os.path.join(chart, "values.yaml"))

    errs = []
    if schema.get("$schema") != "http://json-schema.org/draft-07/schema#":
        errs.append(f"$schema is {schema.get('$schema')!r}, not draft-07")
    try:
        jsonschema.Draft7Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        errs.append(f"not a valid draft-07 schema: {e.message}")
    if schema.get("additionalProperties") is not False:
        errs.append("the top level allows unknown keys (additionalProperties is not false)")
    rep.check("values.schema.json is a strict draft-07 schema", errs)

    props = set(schema.get("properties", {})) - {"global"}
    rep.check("values.yaml and the schema know the same top-level keys", [
        f"in the schema, not in values.yaml: {sorted(props - set(defaults))}"
        if props - set(defaults) else None,
        f"in values.yaml, not in the schema: {sorted(set(defaults) - props)}"
        if set(defaults) - props else None,
    ])

    rep.check("values.yaml passes values.schema.json",
              [f"{p}: {m}" for p, m in schema_errors(schema, defaults)])
    example_values = sorted(glob.glob(os.path.join(examples, "values-*.yaml")))
    rep.check("helm/examples has values files", [] if example_values else ["none found"])
    for path in example_values:
        own = load_yaml(path) or {}
        merged = coalesce(defaults, own)
        rep.check(f"{os.path.relpath(path, examples)} passes values.schema.json",
                  [f"{p}: {m}" for p, m in schema_errors(schema, merged)])
        # Helm merges maps: an example's own nodeSelector keeps the default's labels unless it
        # removes them with null, and a node must then carry both (autoscaled nodes lack ours).
        if isinstance(own.get("nodeSelector"), dict):
            want = {k: v for k, v in own["nodeSelector"].items() if v is not None}
            got = merged.get("nodeSelector") or {}
            rep.check(f"{os.path.relpath(path, examples)} selects nodes by its own nodeSelector "
                      "alone", [] if got == want else [
                          f"merged with the defaults it is {got}; set the labels it does not "
                          f"want to null: {sorted(set(got) - set(want))}"])

    bad_files = sorted(glob.glob(os.path.join(bad_dir, "*.yaml")))
    rep.check("tests/deploy/bad-values has cases", [] if bad_files else ["none found"])
    for path in bad_files:
        want_path, want_word = bad_values_expectation(path)
        name = f"bad-values/{os.path.basename(path)} is rejected at {want_path}"
        if not want_path:
            rep.check(name, ["no '# expect: PATH' line"])
            continue
        found = schema_errors(schema, coalesce(defaults, load_yaml(path) or {}))
        errs = []
        if not found:
            errs.append("the schema accepted it")
        elif {p for p, _ in found} != {want_path}:
            errs.append(f"rejected at {sorted({p for p, _ in found})}, expected only {want_path}")
        if want_word and not any(want_word in m for _, m in found):
            errs.append(f"no message names {want_word!r}: {[m for _, m in found]}")
        if found and not errs:
            print(f"     ({want_path}: {found[0][1]})")
        rep.check(name, errs)
    return schema, defaults


# --- templates, read as text ---------------------------------------------------------------------

VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
BLOCK_OPEN = ("if", "range", "with", "define", "block")


def template_actions(text):
    """The bodies of a template's {{ }} actions, comments dropped; raises ValueError on an action
    left open or a stray '}}'."""
    bodies = []
    pos = 0
    while True:
        start = text.find("{{", pos)
        stray = text.find("}}", pos)
        if stray != -1 and (start == -1 or stray < start):
            line = text.count("\n", 0, stray) + 1
            raise ValueError(f"line {line}: '}}}}' with no '{{{{'")
        if start == -1:
            return bodies
        end = text.find("}}", start + 2)
        nested = text.find("{{", start + 2)
        line = text.count("\n", 0, start) + 1
        if end == -1 or (nested != -1 and nested < end):
            raise ValueError(f"line {line}: '{{{{' not closed")
        body = text[start + 2:end].strip("-").strip()
        if not (body.startswith("/*") and body.endswith("*/")):
            bodies.append((line, body))
        pos = end + 2


def values_paths(values, prefix=""):
    """Dotted paths of values.yaml: every key of every map, down to the leaves."""
    out = []
    if isinstance(values, dict):
        for key, value in values.items():
            path = f"{prefix}.{key}" if prefix else key
            out.append(path)
            out.extend(values_paths(value, path))
    return out


def ref_exists(values, path):
    node = values
    for part in path.split("."):
        if isinstance(node, dict) and not node:
            return True  # a free-form map such as affinity: {}
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def check_templates(rep, chart, defaults):
    tdir = os.path.join(chart, "templates")
    files = sorted(glob.glob(os.path.join(tdir, "*")))
    refs, defined, included = set(), set(), set()
    for path in files:
        name = os.path.relpath(path, chart)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        errs = []
        try:
            actions = template_actions(text)
        except ValueError as e:
            rep.check(f"{name}: actions are closed", [str(e)])
            continue
        stack = []
        for line, body in actions:
            word = body.split()[0] if body.split() else ""
            if word in BLOCK_OPEN:
                stack.append((word, line))
            elif word == "else" and not stack:
                errs.append(f"line {line}: else outside a block")
            elif word == "end":
                if not stack:
                    errs.append(f"line {line}: end with no open block")
                else:
                    stack.pop()
            for m in VALUES_REF.finditer(body):
                refs.add(m.group(1)[1:])
            for m in re.finditer(r"\bdefine\s+\"([^\"]+)\"", body):
                defined.add(m.group(1))
            for m in re.finditer(r"\b(?:include|template)\s+\"([^\"]+)\"", body):
                included.add(m.group(1))
        errs += [f"line {line}: {word} never ended" for word, line in stack]
        if not re.match(r"(#|\{\{-? ?/\*) SPDX-License-Identifier: Apache-2.0", text.lstrip()):
            errs.append("does not start with an SPDX-License-Identifier comment")
        rep.check(f"{name}: actions closed, blocks balanced, SPDX header", errs)

    rep.check("every .Values path the templates use is in values.yaml",
              [f".Values.{r}" for r in sorted(refs) if not ref_exists(defaults, r)])
    unused = [p for p in values_paths(defaults)
              if not any(p == r or p.startswith(r + ".") or r.startswith(p + ".") for r in refs)]
    rep.check("every value in values.yaml is used by a template", unused)
    rep.check("every included template is defined, every defined one included", [
        f"included, never defined: {sorted(included - defined)}" if included - defined else None,
        f"defined, never included: {sorted(defined - included)}" if defined - included else None,
    ])
    for must in ("daemonset.yaml", "NOTES.txt", "_helpers.tpl"):
        rep.check(f"templates/{must} exists", [] if os.path.exists(os.path.join(tdir, must))
                  else ["missing"])


# --- Kubernetes objects: fields against python3-kubernetes' models -------------------------------

@functools.lru_cache(maxsize=None)
def model_required(cls_name):
    """Attributes a generated model's constructor sets unconditionally: the required fields."""
    cls = getattr(k8s_models, cls_name)
    src = inspect.getsource(cls.__init__).splitlines()
    required = set()
    for i, line in enumerate(src):
        m = re.match(r"\s+self\.(\w+) = (\w+)$", line)
        if m and m.group(1) == m.group(2) and m.group(1) in cls.attribute_map \
                and "is not None" not in src[i - 1]:
            required.add(m.group(1))
    return required


def check_fields(obj, type_name, path, errs, quantity=False):
    """Checks obj against the model type python3-kubernetes generated from Kubernetes' OpenAPI:
    no unknown field, each value of its declared type, required fields present."""
    if type_name.startswith("list["):
        if not isinstance(obj, list):
            errs.append(f"{path}: a list expected, got {type(obj).__name__}")
            return
        for i, item in enumerate(obj):
            check_fields(item, type_name[5:-1], f"{path}[{i}]", errs, quantity)
        return
    if type_name.startswith("dict("):
        if not isinstance(obj, dict):
            errs.append(f"{path}: a map expected, got {type(obj).__name__}")
            return
        inner = type_name[5:-1].split(", ", 1)[1]
        for key, value in obj.items():
            if not isinstance(key, str):
                errs.append(f"{path}: key {key!r} is not a string")
            check_fields(value, inner, f"{path}.{key}", errs, quantity)
        return
    if type_name in ("str", "datetime"):
        # Quantities (resources) may be written as numbers; everything else typed string must be
        # one: an unquoted true or 1 in a label or env value is refused by the API server.
        ok = isinstance(obj, str) or (quantity and isinstance(obj, (int, float))
                                      and not isinstance(obj, bool))
        if not ok:
            errs.append(f"{path}: a string expected, got {type(obj).__name__} {obj!r}")
        return
    if type_name == "int":
        if not isinstance(obj, int) or isinstance(obj, bool):
            errs.append(f"{path}: an integer expected, got {obj!r}")
        return
    if type_name == "bool":
        if not isinstance(obj, bool):
            errs.append(f"{path}: true or false expected, got {obj!r}")
        return
    if type_name in ("object", "float"):
        return
    cls = getattr(k8s_models, type_name)
    if not isinstance(obj, dict):
        errs.append(f"{path}: an object ({type_name}) expected, got {type(obj).__name__}")
        return
    by_json = {json_name: attr for attr, json_name in cls.attribute_map.items()}
    for key, value in obj.items():
        if key not in by_json:
            errs.append(f"{path}: unknown field {key!r} in {type_name}")
            continue
        attr = by_json[key]
        check_fields(value, cls.openapi_types[attr], f"{path}.{key}", errs,
                     quantity=quantity or type_name == "V1ResourceRequirements")
    for attr in model_required(type_name):
        if cls.attribute_map[attr] not in obj:
            errs.append(f"{path}: required field {cls.attribute_map[attr]!r} of {type_name} "
                        "missing")


def quantity_value(text):
    m = QUANTITY.match(str(text))
    if not m:
        return None
    number, suffix = m.group(1), m.group(3) or ""
    if suffix[:1] in ("e", "E"):
        return decimal.Decimal(number + suffix)
    return decimal.Decimal(number) * decimal.Decimal(QUANTITY_SCALE[suffix])


def check_meta(meta, path, errs):
    name = meta.get("name", "")
    if not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        errs.append(f"{path}.name: {name!r} is not a DNS-1123 subdomain")
    for field in ("labels", "annotations"):
        for key, value in (meta.get(field) or {}).items():
            prefix, _, base = key.rpartition("/")
            if (prefix and not DNS1123_SUBDOMAIN.match(prefix)) or len(base) > 63 \
                    or not LABEL_NAME.match(base):
                errs.append(f"{path}.{field}: bad key {key!r}")
            if field == "labels" and (len(str(value)) > 63 or not LABEL_VALUE.match(str(value))):
                errs.append(f"{path}.labels.{key}: bad value {value!r}")


def check_pod_spec(spec, path, errs):
    """What Kubernetes' validation refuses in the parts of a pod spec harp's files use."""
    volumes = {}
    for i, vol in enumerate(spec.get("volumes") or []):
        if vol.get("name") in volumes:
            errs.append(f"{path}.volumes[{i}]: name {vol.get('name')!r} used twice")
        volumes[vol.get("name")] = vol
        if not DNS1123_LABEL.match(str(vol.get("name"))):
            errs.append(f"{path}.volumes[{i}].name: {vol.get('name')!r} is not a DNS-1123 label")
        host = vol.get("hostPath")
        if host is not None:
            if not str(host.get("path", "")).startswith("/"):
                errs.append(f"{path}.volumes[{i}].hostPath.path is not absolute")
            if host.get("type", "") not in ("", "DirectoryOrCreate", "Directory", "FileOrCreate",
                                            "File", "Socket", "CharDevice", "BlockDevice"):
                errs.append(f"{path}.volumes[{i}].hostPath.type {host.get('type')!r} is unknown")
    if spec.get("hostNetwork") and spec.get("dnsPolicy") != "ClusterFirstWithHostNet":
        errs.append(f"{path}: hostNetwork without dnsPolicy ClusterFirstWithHostNet: cluster "
                    "names would not resolve")
    names = set()
    for ci, ctr in enumerate(spec.get("containers") or []):
        cpath = f"{path}.containers[{ci}]"
        name = ctr.get("name")
        if not DNS1123_LABEL.match(str(name)) or len(str(name)) > 63:
            errs.append(f"{cpath}.name: {name!r} is not a DNS-1123 label")
        if name in names:
            errs.append(f"{cpath}.name: {name!r} used twice")
        names.add(name)
        if not isinstance(ctr.get("image"), str) or not ctr["image"].strip():
            errs.append(f"{cpath}: no image")
        if ctr.get("imagePullPolicy", "IfNotPresent") not in ("Always", "IfNotPresent", "Never"):
            errs.append(f"{cpath}.imagePullPolicy {ctr.get('imagePullPolicy')!r} is unknown")
        privileged = bool((ctr.get("securityContext") or {}).get("privileged"))
        paths = set()
        for mi, mount in enumerate(ctr.get("volumeMounts") or []):
            mpath = f"{cpath}.volumeMounts[{mi}]"
            if mount.get("name") not in volumes:
                errs.append(f"{mpath}: volume {mount.get('name')!r} is not in the pod's volumes")
            if not str(mount.get("mountPath", "")).startswith("/"):
                errs.append(f"{mpath}.mountPath is not absolute")
            if mount.get("mountPath") in paths:
                errs.append(f"{mpath}.mountPath {mount.get('mountPath')!r} mounted twice")
            paths.add(mount.get("mountPath"))
            prop = mount.get("mountPropagation", "None")
            if prop not in ("None", "HostToContainer", "Bidirectional"):
                errs.append(f"{mpath}.mountPropagation {prop!r} is unknown")
            if prop == "Bidirectional" and not privileged:
                errs.append(f"{mpath}: Bidirectional propagation needs a privileged container")
        env_names = set()
        for ei, env in enumerate(ctr.get("env") or []):
            if not ENV_NAME.match(str(env.get("name"))):
                errs.append(f"{cpath}.env[{ei}].name {env.get('name')!r} is not valid")
            if env.get("name") in env_names:
                errs.append(f"{cpath}.env[{ei}]: {env.get('name')!r} set twice")
            env_names.add(env.get("name"))
        for pname in ("readinessProbe", "livenessProbe", "startupProbe"):
            probe = ctr.get(pname)
            if probe is not None:
                handlers = [h for h in ("exec", "httpGet", "tcpSocket", "grpc") if h in probe]
                if len(handlers) != 1:
                    errs.append(f"{cpath}.{pname}: {len(handlers)} handlers, must be one")
        caps = ((ctr.get("securityContext") or {}).get("capabilities") or {})
        for cap in (caps.get("add") or []) + (caps.get("drop") or []):
            if cap not in LINUX_CAPS:
                errs.append(f"{cpath}: capability {cap!r} is not a Linux capability name "
                            "(Kubernetes wants e.g. NET_RAW, without CAP_)")
        check_resources(ctr.get("resources") or {}, f"{cpath}.resources", errs)


def check_resources(res, path, errs):
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    for kind, table in (("limits", limits), ("requests", requests)):
        for name, value in table.items():
            if quantity_value(value) is None:
                errs.append(f"{path}.{kind}.{name}: {value!r} is not a quantity")
    for name, value in requests.items():
        if name in limits and None not in (quantity_value(value), quantity_value(limits[name])):
            req, lim = quantity_value(value), quantity_value(limits[name])
            if req > lim:
                errs.append(f"{path}: {name} request {value} exceeds its limit {limits[name]}")
        # Hugepages and extended resources cannot be overcommitted.
        if name.startswith("hugepages-") or "/" in name:
            if name not in limits:
                errs.append(f"{path}: {name} requested without a limit")
            elif quantity_value(value) != quantity_value(limits[name]):
                errs.append(f"{path}: {name} request {value} differs from its limit {limits[name]}")
    if any(n.startswith("hugepages-") for n in list(limits) + list(requests)) and \
            not any(n in ("cpu", "memory") for n in list(limits) + list(requests)):
        errs.append(f"{path}: hugepages need a cpu or memory request or limit")


def pod_templates(doc):
    """(path, pod template) of each pod an object makes: a DaemonSet's, or each replica type's
    of the Kubeflow jobs."""
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "DaemonSet":
        return [("spec.template", spec.get("template") or {})]
    key = {"MPIJob": "mpiReplicaSpecs", "PyTorchJob": "pytorchReplicaSpecs"}.get(kind)
    if key:
        return [(f"spec.{key}.{role}.template", (rs or {}).get("template") or {})
                for role, rs in (spec.get(key) or {}).items()]
    if kind in ("ClusterTrainingRuntime", "TrainingRuntime"):
        rjobs = (((spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or [])
        return [(f"spec.template.spec.replicatedJobs[{i}].template.spec.template",
                 (((rj or {}).get("template") or {}).get("spec") or {}).get("template") or {})
                for i, rj in enumerate(rjobs)]
    return []


def check_kubeflow_job(doc, errs):
    """The job CRDs' own fields, written down here from the MPI operator's (v2beta1) and the
    training operator's (v1) CRDs: python3-kubernetes has no models for them."""
    kind, spec = doc["kind"], doc.get("spec") or {}
    run_policy = {"cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
                  "backoffLimit", "schedulingPolicy", "suspend", "managedBy"}
    if kind == "MPIJob":
        want_api, key, roles = "kubeflow.org/v2beta1", "mpiReplicaSpecs", ("Launcher", "Worker")
        fields = {"slotsPerWorker", "runPolicy", "sshAuthMountPath", "launcherCreationPolicy",
                  "mpiImplementation", "runLauncherAsWorker", key}
        if spec.get("mpiImplementation", "OpenMPI") not in ("OpenMPI", "Intel", "MPICH"):
            errs.append(f"spec.mpiImplementation {spec.get('mpiImplementation')!r} is unknown")
    else:
        want_api, key, roles = "kubeflow.org/v1", "pytorchReplicaSpecs", ("Master", "Worker")
        fields = {"runPolicy", "elasticPolicy", "nprocPerNode", key}
        if "nprocPerNode" in spec and not isinstance(spec["nprocPerNode"], str):
            errs.append("spec.nprocPerNode must be a string (the CRD types it so)")
    if doc.get("apiVersion") != want_api:
        errs.append(f"{kind} apiVersion {doc.get('apiVersion')!r}, expected {want_api}")
    errs += [f"spec: unknown field {k!r} in {kind}" for k in spec if k not in fields]
    errs += [f"spec.runPolicy: unknown field {k!r}" for k in (spec.get("runPolicy") or {})
             if k not in run_policy]
    replicas = spec.get(key) or {}
    if roles[0] not in replicas:
        errs.append(f"spec.{key}.{roles[0]} missing")
    for role, rs in replicas.items():
        rpath = f"spec.{key}.{role}"
        if role not in roles:
            errs.append(f"{rpath}: {kind} has no replica type {role!r}")
        errs += [f"{rpath}: unknown field {k!r}" for k in (rs or {})
                 if k not in ("replicas", "restartPolicy", "template")]
        if not isinstance((rs or {}).get("replicas"), int) or rs["replicas"] < 1:
            errs.append(f"{rpath}.replicas must be a positive integer")
        if role == roles[0] and (rs or {}).get("replicas") != 1:
            errs.append(f"{rpath}.replicas must be 1")
        if (rs or {}).get("restartPolicy", "Never") not in ("Always", "OnFailure", "Never",
                                                            "ExitCode"):
            errs.append(f"{rpath}.restartPolicy {rs.get('restartPolicy')!r} is unknown")
        if kind == "PyTorchJob":
            names = [c.get("name") for c in
                     (((rs or {}).get("template") or {}).get("spec") or {}).get("containers", [])]
            if "pytorch" not in names:
                errs.append(f"{rpath}: no container named 'pytorch', which the operator looks for")


TRAINER_API = "trainer.kubeflow.org/v1alpha1"
TRAINER_STEP = "trainer.kubeflow.org/trainjob-ancestor-step"
# What Trainer's torch plugin sets on the node container; a TrainJob may not set them.
PET_VARS = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
            "PET_MASTER_PORT"}
RFC1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def unknown_fields(obj, known, path, errs):
    if obj is None:
        return
    if not isinstance(obj, dict):
        errs.append(f"{path}: an object expected, got {type(obj).__name__}")
        return
    errs += [f"{path}: unknown field {k!r}" for k in obj if k not in known]


def positive_int(value, path, errs):
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        errs.append(f"{path} must be a positive integer, not {value!r}")


def trainer_node(runtime):
    """(path, Job template) of a runtime's trainer step: the replicated job labelled
    trainjob-ancestor-step: trainer, or (None, None)."""
    rjobs = ((((runtime.get("spec") or {}).get("template") or {}).get("spec") or {})
             .get("replicatedJobs") or [])
    for i, rj in enumerate(rjobs):
        tmpl = (rj or {}).get("template") or {}
        if ((tmpl.get("metadata") or {}).get("labels") or {}).get(TRAINER_STEP) == "trainer":
            return f"spec.template.spec.replicatedJobs[{i}]", rj
    return None, None


def check_trainer_object(doc, errs):
    """Kubeflow Trainer v2's CRDs as of its v2.2 and v2.3 releases (kubeflow/trainer,
    pkg/apis/trainer/v1alpha1), written down here: python3-kubernetes has no models for them, and
    their Jobs and pods are checked against its batch/v1 and core/v1 models."""
    kind, spec = doc["kind"], doc.get("spec") or {}
    if doc.get("apiVersion") != TRAINER_API:
        errs.append(f"{kind} apiVersion {doc.get('apiVersion')!r}, expected {TRAINER_API}")
    if kind == "ClusterTrainingRuntime":
        if "namespace" in doc["metadata"]:
            errs.append("metadata.namespace: a ClusterTrainingRuntime is cluster-scoped")
        unknown_fields(spec, {"mlPolicy", "podGroupPolicy", "template"}, "spec", errs)
        ml = spec.get("mlPolicy") or {}
        unknown_fields(ml, {"numNodes", "torch", "mpi", "flux", "jax", "xgboost"},
                       "spec.mlPolicy", errs)
        positive_int(ml.get("numNodes"), "spec.mlPolicy.numNodes", errs)
        if len([k for k in ml if k != "numNodes"]) > 1:
            errs.append("spec.mlPolicy: at most one of torch, mpi, flux, jax, xgboost")
        # v2.2 left torch no field, v2.3 only envInjection (numProcPerNode moved to the TrainJob)
        unknown_fields(ml.get("torch"), {"envInjection"}, "spec.mlPolicy.torch", errs)
        tmpl = spec.get("template") or {}
        unknown_fields(tmpl, {"metadata", "spec"}, "spec.template", errs)
        js = tmpl.get("spec") or {}
        unknown_fields(js, {"replicatedJobs", "network", "successPolicy", "failurePolicy",
                            "startupPolicy", "coordinator", "suspend", "ttlSecondsAfterFinished",
                            "managedBy", "volumeClaimPolicies"}, "spec.template.spec", errs)
        if "subdomain" in (js.get("network") or {}):
            errs.append("spec.template.spec.network.subdomain: Trainer's torch plugin names the "
                        "master by the TrainJob's name; another subdomain breaks that")
        names = []
        for i, rj in enumerate(js.get("replicatedJobs") or []):
            rpath = f"spec.template.spec.replicatedJobs[{i}]"
            unknown_fields(rj, {"name", "template", "replicas", "dependsOn", "groupName"}, rpath,
                           errs)
            rj = rj or {}
            if not DNS1123_LABEL.match(str(rj.get("name"))):
                errs.append(f"{rpath}.name: {rj.get('name')!r} is not a DNS-1123 label")
            names.append(rj.get("name"))
            positive_int(rj.get("replicas"), f"{rpath}.replicas", errs)
            if "template" not in rj:
                errs.append(f"{rpath}.template missing")
            else:
                check_fields(rj["template"], "V1JobTemplateSpec", f"{rpath}.template", errs)
        path, node = trainer_node(doc)
        if node is None:
            errs.append(f"no replicated job carries the label {TRAINER_STEP}: trainer")
        else:
            if node.get("name") != "node":
                errs.append(f"{path}.name is {node.get('name')!r}: Trainer derives the master's "
                            "address from a trainer job named 'node'")
            if node.get("replicas", 1) != 1:
                errs.append(f"{path}.replicas must be 1 for the trainer step")
            ctrs = ((((node.get("template") or {}).get("spec") or {}).get("template") or {})
                    .get("spec") or {}).get("containers") or []
            if "node" not in [c.get("name") for c in ctrs]:
                errs.append(f"{path}: no container named 'node', which takes the TrainJob's "
                            "image, command, env and resources")
        if len(set(names)) != len(names):
            errs.append("spec.template.spec.replicatedJobs: a name used twice")
    elif kind == "TrainJob":
        name = str(doc["metadata"].get("name"))
        if not RFC1035_LABEL.match(name) or len(name) > 63:
            errs.append(f"metadata.name: {name!r} is not an RFC 1035 label of at most 63 "
                        "characters")
        unknown_fields(spec, {"runtimeRef", "initializer", "trainer", "suspend", "managedBy",
                              "runtimePatches", "activeDeadlineSeconds"}, "spec", errs)
        ref = spec.get("runtimeRef")
        if not isinstance(ref, dict) or not ref.get("name"):
            errs.append("spec.runtimeRef.name missing")
        else:
            unknown_fields(ref, {"name", "apiGroup", "kind"}, "spec.runtimeRef", errs)
            if ref.get("apiGroup", "trainer.kubeflow.org") != "trainer.kubeflow.org":
                errs.append(f"spec.runtimeRef.apiGroup {ref['apiGroup']!r} is not "
                            "trainer.kubeflow.org")
            if ref.get("kind", "ClusterTrainingRuntime") not in ("ClusterTrainingRuntime",
                                                                  "TrainingRuntime"):
                errs.append(f"spec.runtimeRef.kind {ref['kind']!r} is unknown")
        tr = spec.get("trainer") or {}
        unknown_fields(tr, {"image", "command", "args", "env", "numNodes", "resourcesPerNode",
                            "numProcPerNode"}, "spec.trainer", errs)
        for key in ("command", "args"):
            if key in tr and not (isinstance(tr[key], list)
                                  and all(isinstance(a, str) for a in tr[key])):
                errs.append(f"spec.trainer.{key} must be a list of strings")
        positive_int(tr.get("numNodes"), "spec.trainer.numNodes", errs)
        # an integer since v2.2 (it was int-or-string, "auto" among them, before)
        positive_int(tr.get("numProcPerNode"), "spec.trainer.numProcPerNode", errs)
        if "env" in tr:
            check_fields(tr["env"], "list[V1EnvVar]", "spec.trainer.env", errs)
            errs += [f"spec.trainer.env: {e.get('name')} is Trainer's to set" for e in tr["env"]
                     if isinstance(e, dict) and e.get("name") in PET_VARS]
        if "resourcesPerNode" in tr:
            check_fields(tr["resourcesPerNode"], "V1ResourceRequirements",
                         "spec.trainer.resourcesPerNode", errs)


def trainjob_pod(job, docs):
    """(path, pod spec) the TrainJob's node pods get: its runtime's trainer pod template (from
    the same file) with the TrainJob's image, command, args, env and resources on the container
    named node, as Trainer applies them; (None, None) when the runtime is not in docs."""
    ref = ((job.get("spec") or {}).get("runtimeRef") or {})
    runtime = next((d for d in docs if d.get("kind") == ref.get("kind", "ClusterTrainingRuntime")
                    and (d.get("metadata") or {}).get("name") == ref.get("name")), None)
    if runtime is None:
        return None, None
    path, node = trainer_node(runtime)
    if node is None:
        return None, None
    pod = copy.deepcopy((((node.get("template") or {}).get("spec") or {}).get("template") or {})
                        .get("spec") or {})
    tr = (job.get("spec") or {}).get("trainer") or {}
    for ctr in pod.get("containers") or []:
        if ctr.get("name") != "node":
            continue
        for key in ("image", "command", "args"):
            if key in tr:
                ctr[key] = tr[key]
        env = {e.get("name"): e for e in ctr.get("env") or []}
        env.update({e.get("name"): e for e in tr.get("env") or []})
        if env:
            ctr["env"] = list(env.values())
        if "resourcesPerNode" in tr:
            ctr["resources"] = tr["resourcesPerNode"]
    return f"runtime {ref.get('name')} {path} with TrainJob spec.trainer", pod


def check_object(doc):
    """Kubernetes' view of one object: the fields and the validation rules above."""
    errs = []
    for field in ("apiVersion", "kind", "metadata"):
        if field not in doc:
            errs.append(f"{field} missing")
    if errs:
        return errs
    check_meta(doc["metadata"], "metadata", errs)
    model = CORE_KINDS.get((doc["apiVersion"], doc["kind"]))
    if model:
        check_fields(doc, model, doc["kind"], errs)
    elif doc["kind"] in ("MPIJob", "PyTorchJob"):
        check_kubeflow_job(doc, errs)
        for path, tmpl in pod_templates(doc):
            check_fields(tmpl, "V1PodTemplateSpec", path, errs)
    elif doc["kind"] in ("ClusterTrainingRuntime", "TrainJob"):
        check_trainer_object(doc, errs)
    else:
        errs.append(f"{doc['apiVersion']} {doc['kind']}: not a kind these checks know")
    for path, tmpl in pod_templates(doc):
        spec = tmpl.get("spec")
        if not isinstance(spec, dict) or not spec.get("containers"):
            errs.append(f"{path}.spec.containers missing")
            continue
        check_pod_spec(spec, f"{path}.spec", errs)
    if doc["kind"] == "DaemonSet":
        match = ((doc.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        labels = (((doc.get("spec") or {}).get("template") or {}).get("metadata") or {}) \
            .get("labels") or {}
        if not match or any(labels.get(k) != v for k, v in match.items()):
            errs.append("spec.selector.matchLabels do not select the pod template's labels")
    return errs


# --- harp's rules ---------------------------------------------------------------------------------

def harp_param_names(params_def):
    with open(params_def, encoding="utf-8") as f:
        return set(re.findall(r"HARP_PARAM_\w+\(\s*\w+,\s*\"(HARP_[A-Z0-9_]+)\"", f.read()))


def mount_of(ctr, spec, host_path):
    """(volumeMount, volume) of the container's mount of a hostPath, or (None, None)."""
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for mount in ctr.get("volumeMounts") or []:
        vol = volumes.get(mount.get("name")) or {}
        if (vol.get("hostPath") or {}).get("path") == host_path:
            return mount, vol
    return None, None


def env_of(ctr):
    return {e.get("name"): e.get("value") for e in ctr.get("env") or []}


def check_harp_env(doc, known, errs):
    for path, tmpl in pod_templates(doc):
        for ctr in ((tmpl.get("spec") or {}).get("containers") or []):
            for name in env_of(ctr):
                if str(name).startswith("HARP_") and name not in known:
                    errs.append(f"{path}: {name} is no harp setting (src/params.def); libharp "
                                "refuses unknown HARP_* variables")


def check_nccl_env(env, where, errs):
    if env.get("NCCL_NET_PLUGIN") != HARP_PLUGIN:
        errs.append(f"{where}: NCCL_NET_PLUGIN is {env.get('NCCL_NET_PLUGIN')!r}, not the full "
                    f"path {HARP_PLUGIN} (found through its RUNPATH, whatever the image's "
                    "LD_LIBRARY_PATH)")
    if "LD_LIBRARY_PATH" in env:
        errs.append(f"{where}: sets LD_LIBRARY_PATH, which replaces the image's own (CUDA, "
                    "NCCL); the plugin's full path needs none")
    if env.get("NCCL_DEBUG") != "INFO":
        errs.append(f"{where}: NCCL_DEBUG is not INFO (the NET/HARP line shows harp is in use)")


def agent_host_dir(ctr, spec):
    """The host directory a container mounts at /run/harp (the node agent's), or None."""
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for mount in ctr.get("volumeMounts") or []:
        if mount.get("mountPath") == AGENT_DIR:
            return ((volumes.get(mount.get("name")) or {}).get("hostPath") or {}).get("path"), \
                mount
    return None, None


def check_training_pod(spec, path, errs, nccl_in_pod):
    """A pod that runs harp: host network, NET_RAW and IPC_LOCK, the node agent's socket and the
    profile from the node, hugepages, the runtime's default seccomp profile; never privileged,
    no bpffs (the agent enters its sockets)."""
    if spec.get("hostNetwork") is not True:
        errs.append(f"{path}: hostNetwork is not true (AF_XDP binds the node NIC's queues)")
    harp_ctrs = 0
    for ctr in spec.get("containers") or []:
        cpath = f"{path}.containers[{ctr.get('name')}]"
        sc = ctr.get("securityContext") or {}
        if sc.get("privileged"):
            errs.append(f"{cpath}: privileged; training pods must not be")
        host_dir, run_mount = agent_host_dir(ctr, spec)
        bpf_mount, _ = mount_of(ctr, spec, "/sys/fs/bpf")
        if run_mount is None and bpf_mount is None:
            continue
        harp_ctrs += 1
        if run_mount is None:
            errs.append(f"{cpath}: mounts /sys/fs/bpf but not the node agent's {AGENT_DIR}; "
                        "through the agent the pod needs no bpf() and no bpffs")
        else:
            if host_dir != AGENT_DIR:
                errs.append(f"{cpath}: {AGENT_DIR} comes from {host_dir!r}, not the host's "
                            f"{AGENT_DIR} (the chart's agent.hostDir)")
            if run_mount.get("readOnly") is not True:
                errs.append(f"{cpath}: {AGENT_DIR} is not read-only (connecting to the socket "
                            "needs no write access)")
        if bpf_mount is not None:
            errs.append(f"{cpath}: mounts /sys/fs/bpf; with the node agent it is not needed")
        seccomp = (sc.get("seccompProfile") or (spec.get("securityContext") or {})
                   .get("seccompProfile") or {}).get("type")
        if seccomp != "RuntimeDefault":
            errs.append(f"{cpath}: seccompProfile is {seccomp!r}; through the node agent harp "
                        "needs no bpf(), so the runtime's default profile (RuntimeDefault), set "
                        "explicitly")
        conf_mount, _ = mount_of(ctr, spec, "/etc/harp")
        if conf_mount is None or conf_mount.get("mountPath") != "/etc/harp" \
                or conf_mount.get("readOnly") is not True:
            errs.append(f"{cpath}: the host's /etc/harp must be mounted read-only at /etc/harp")
        caps = sc.get("capabilities") or {}
        added = set(caps.get("add") or [])
        if caps.get("drop") != ["ALL"]:
            errs.append(f"{cpath}: capabilities.drop is {caps.get('drop')}, not [ALL]")
        if not HARP_POD_CAPS <= added:
            errs.append(f"{cpath}: adds {sorted(added)}, lacks {sorted(HARP_POD_CAPS - added)}")
        extra = added - HARP_POD_CAPS
        runs_sshd = str((ctr.get("command") or [""])[0]).endswith("/sshd")
        if extra & FORBIDDEN_CAPS or (extra and not (runs_sshd and extra <= SSHD_CAPS)):
            errs.append(f"{cpath}: adds {sorted(extra)} beyond NET_RAW and IPC_LOCK"
                        + ("" if runs_sshd else " (only an sshd container may add "
                           f"{sorted(SSHD_CAPS)})"))
        res = ctr.get("resources") or {}
        hp_limit = (res.get("limits") or {}).get("hugepages-2Mi")
        if not hp_limit or not quantity_value(hp_limit):
            errs.append(f"{cpath}: no hugepages-2Mi limit")
        elif (res.get("requests") or {}).get("hugepages-2Mi") != hp_limit:
            errs.append(f"{cpath}: hugepages-2Mi request differs from its limit")
        if "memory" not in (res.get("requests") or {}) or "memory" not in (res.get("limits") or {}):
            errs.append(f"{cpath}: memory needs a request and a limit beside hugepages")
        if nccl_in_pod:
            check_nccl_env(env_of(ctr), cpath, errs)
    if harp_ctrs == 0:
        errs.append(f"{path}: no container mounts the node agent's {AGENT_DIR}")


def check_mpi_launcher(spec, path, errs):
    """mpirun's ranks start under the workers' sshd and inherit nothing from the worker pod: the
    launcher must set NCCL's variables and hand each to the ranks with -x."""
    for ctr in spec.get("containers") or []:
        cpath = f"{path}.containers[{ctr.get('name')}]"
        if (ctr.get("securityContext") or {}).get("privileged"):
            errs.append(f"{cpath}: privileged")
        env = env_of(ctr)
        check_nccl_env(env, cpath, errs)
        argv = [str(a) for a in (ctr.get("command") or []) + (ctr.get("args") or [])]
        forwarded = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-x"}
        for name in env:
            if name.startswith(("NCCL_", "HARP_")) and name not in forwarded and not any(f.startswith(name + "=")
                                                          for f in forwarded):
                errs.append(f"{cpath}: {name} is set but not passed to the ranks with -x")


def check_example_policy(doc, known, errs, docs=()):
    if doc["kind"] == "TrainJob":
        env = ((doc.get("spec") or {}).get("trainer") or {}).get("env") or []
        errs += [f"spec.trainer.env: {e.get('name')} is no harp setting (src/params.def)"
                 for e in env if str(e.get("name")).startswith("HARP_")
                 and e.get("name") not in known]
        path, pod = trainjob_pod(doc, docs)
        if pod is None:
            errs.append("its runtime (spec.runtimeRef) is not in the same file, with a trainer "
                        "step whose container is named node")
        else:
            check_training_pod(pod, path, errs, nccl_in_pod=True)
        return
    check_harp_env(doc, known, errs)
    for path, tmpl in pod_templates(doc):
        spec = tmpl.get("spec") or {}
        if doc["kind"] == "MPIJob" and path.endswith(".Launcher.template"):
            check_mpi_launcher(spec, f"{path}.spec", errs)
        else:
            check_training_pod(spec, f"{path}.spec", errs, nccl_in_pod=doc["kind"] != "MPIJob")


def expected_agent(values, app_version):
    """What the DaemonSet's container must run for these values (the deploy interface: options,
    then the subcommand, then the interfaces)."""
    ifaces = [str(i) for i in values["interfaces"]]
    opts = ["--queues", str(values["queues"]), "--port-base", str(values["portBase"]),
            "--port-count", str(values["portCount"]), "--frame-count", str(values["frameCount"]),
            "--hugepages", str(values["hugepages"]), "--xdp-mode", str(values["xdpMode"]),
            "--family", str(values["family"])]
    agent = values["agent"]
    if agent["enabled"]:
        opts += ["--agent-socket", f"{AGENT_DIR}/agent.sock"]
        for uid in agent["allowUids"]:
            opts += ["--allow-uid", str(uid)]
    else:
        opts += ["--agent-socket", "off"]
    tag = values["image"]["tag"] or app_version
    return {
        "image": f"{values['image']['repository']}:{tag}",
        "args": opts + ["run"] + ifaces,
        "preStop": [HARP_ATTACH, "down"] + ifaces,
        "readiness": [HARP_ATTACH, "status"] + ifaces,
    }


def check_agent_daemonset(ds, values, app_version, errs):
    spec = ds["spec"]["template"]["spec"]
    want = expected_agent(values, app_version)
    if spec.get("hostNetwork") is not True:
        errs.append("hostNetwork is not true")
    if spec.get("hostPID") is not True:
        errs.append("hostPID is not true (the agent's per-pod limit reads clients' pid "
                    "namespaces from the host's /proc on kernels before 6.11)")
    ctrs = spec.get("containers") or []
    if len(ctrs) != 1:
        errs.append(f"{len(ctrs)} containers; the privileged agent must be the only one")
        return
    ctr = ctrs[0]
    if (ctr.get("securityContext") or {}).get("privileged") is not True:
        errs.append("the agent container is not privileged")
    for key in ("initContainers", "ephemeralContainers"):
        if spec.get(key):
            errs.append(f"{key} present: nothing but the agent should run there")
    checks = [
        ("command", ctr.get("command"), [HARP_ATTACH]),
        ("args", ctr.get("args"), want["args"]),
        ("image", ctr.get("image"), want["image"]),
        ("imagePullPolicy", ctr.get("imagePullPolicy"), values["image"]["pullPolicy"]),
        ("preStop", (((ctr.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {})
         .get("command"), want["preStop"]),
        ("readinessProbe", ((ctr.get("readinessProbe") or {}).get("exec") or {}).get("command"),
         want["readiness"]),
        ("terminationGracePeriodSeconds", spec.get("terminationGracePeriodSeconds"),
         values["terminationGracePeriodSeconds"]),
        ("priorityClassName", spec.get("priorityClassName", ""), values["priorityClassName"]),
        ("nodeSelector", spec.get("nodeSelector", {}), values["nodeSelector"]),
        ("tolerations", spec.get("tolerations", []), values["tolerations"]),
        ("affinity", spec.get("affinity", {}), values["affinity"]),
        ("resources", ctr.get("resources", {}), values["resources"]),
        ("updateStrategy.type", ds["spec"].get("updateStrategy", {}).get("type"),
         values["updateStrategy"]["type"]),
        ("dnsPolicy", spec.get("dnsPolicy"), "ClusterFirstWithHostNet"),
    ]
    for name, got, expected in checks:
        if got != expected:
            errs.append(f"{name} is {got!r}, values say {expected!r}")
    bpf_mount, bpf_vol = mount_of(ctr, spec, "/sys/fs/bpf")
    if bpf_mount is None or bpf_mount.get("mountPath") != "/sys/fs/bpf" \
            or bpf_mount.get("mountPropagation") != "Bidirectional" or bpf_mount.get("readOnly"):
        errs.append("/sys/fs/bpf is not mounted read-write at /sys/fs/bpf with Bidirectional "
                    "propagation (pinned maps must reach the node)")
    conf_mount, conf_vol = mount_of(ctr, spec, "/etc/harp")
    if conf_mount is None or conf_mount.get("mountPath") != "/etc/harp" \
            or conf_mount.get("readOnly"):
        errs.append("the host's /etc/harp is not mounted read-write at /etc/harp")
    elif (conf_vol.get("hostPath") or {}).get("type") != "DirectoryOrCreate":
        errs.append("the /etc/harp hostPath is not DirectoryOrCreate")
    host_dir, run_mount = agent_host_dir(ctr, spec)
    if values["agent"]["enabled"]:
        run_vol = next((v for v in spec.get("volumes") or []
                        if v.get("name") == (run_mount or {}).get("name")), {})
        if run_mount is None or run_mount.get("readOnly") or host_dir != values["agent"]["hostDir"]:
            errs.append(f"agent.hostDir {values['agent']['hostDir']!r} is not mounted read-write "
                        f"at {AGENT_DIR} (the agent's socket lies there)")
        elif (run_vol.get("hostPath") or {}).get("type") != "DirectoryOrCreate":
            errs.append(f"the {AGENT_DIR} hostPath is not DirectoryOrCreate")
    elif run_mount is not None:
        errs.append(f"agent.enabled is false, yet {AGENT_DIR} is mounted")
    if values["terminationGracePeriodSeconds"] < 10:
        errs.append("terminationGracePeriodSeconds leaves `down` no time")


# --- Dockerfiles ---------------------------------------------------------------------------------

def dockerfile_instructions(path):
    """[(INSTRUCTION, arguments)] with continuation lines joined and comments dropped."""
    out, pending = [], ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.lstrip().startswith("#"):
                continue
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            line = pending + line
            pending = ""
            if line.strip():
                word, _, rest = line.strip().partition(" ")
                out.append((word.upper(), " ".join(rest.split())))
    return out


def dockerfile_stages(instructions):
    """[{'from', 'name', 'body': [(INSTR, args)]}] per FROM; a FROM naming an ARG given before the
    first FROM reads as that ARG's default (what a build without --build-arg uses)."""
    stages = []
    defaults = {}
    for instr, args in instructions:
        if instr == "ARG" and not stages:
            name, _, value = args.partition("=")
            defaults[name.strip()] = value.strip()
            continue
        if instr == "FROM":
            args = re.sub(r"\$\{(\w+)\}|\$(\w+)",
                          lambda m: defaults.get(m.group(1) or m.group(2), m.group(0)), args)
            parts = args.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append({"from": parts[0], "name": name, "body": []})
        elif stages:
            stages[-1]["body"].append((instr, args))
    return stages


def apt_packages(args):
    m = re.search(r"apt-get install ((?:-\S+ )*)(.*?)(?:&&|$)", args)
    return set(m.group(2).split()) if m else set()


def setup_packages(setup_sh):
    with open(setup_sh, encoding="utf-8") as f:
        text = f.read()
    block = re.search(r"^packages=\((.*?)^\)", text, re.S | re.M).group(1)
    return {w for line in block.splitlines() for w in line.split("#")[0].split()}


def check_dockerfiles(rep, repo, chart):
    cdir = os.path.join(repo, "container")
    parsed = {}
    for name in ("agent.Dockerfile", "plugin.Dockerfile"):
        path = os.path.join(cdir, name)
        if not os.path.exists(path):
            rep.check(f"container/{name} exists", ["missing"])
            return
        with open(path, encoding="utf-8") as f:
            head = f.read(400)
        stages = dockerfile_stages(dockerfile_instructions(path))
        errs = [] if "SPDX-License-Identifier: Apache-2.0" in head else ["no SPDX header"]
        known = set()
        for i, st in enumerate(stages):
            if st["from"] != "scratch" and ":" not in st["from"] and st["from"] not in known:
                errs.append(f"stage {i}: FROM {st['from']} is neither an earlier stage nor a "
                            "tagged image")
            for instr, args in st["body"]:
                m = re.search(r"--from=(\S+)", args) if instr == "COPY" else None
                if m and m.group(1) not in known:
                    errs.append(f"stage {i}: COPY --from={m.group(1)} names no earlier stage")
                if instr not in ("RUN", "COPY", "WORKDIR", "ENV", "ARG", "ENTRYPOINT", "CMD",
                                 "LABEL", "USER"):
                    errs.append(f"stage {i}: unexpected instruction {instr}")
            if st["name"]:
                known.add(st["name"])
        rep.check(f"container/{name}: stages and COPY --from resolve", errs)
        parsed[name] = stages

    agent, plugin = parsed["agent.Dockerfile"], parsed["plugin.Dockerfile"]
    build = next((s for s in agent if s["name"] == "build"), None)
    plugin_build = next((s for s in plugin if s["name"] == "build"), None)
    rep.check("container: the two build stages are the same", [] if build and
              build == plugin_build else ["agent.Dockerfile's and plugin.Dockerfile's 'build' "
                                          "stages differ"])
    if not build:
        return
    build_text = " ; ".join(a for _, a in build["body"])
    build_pkgs = set().union(*(apt_packages(a) for i, a in build["body"] if i == "RUN"))
    # libc6-dev: gcc only recommends it, and the image installs without recommends.
    allowed = setup_packages(os.path.join(repo, "scripts", "setup.sh")) | {"libc6-dev"}
    needed = {"clang", "llvm", "libbpf-dev", "libxdp-dev", "bpftool", "libelf-dev", "cmake",
              "gcc", "make", "pkg-config"}
    rep.check("container: the build stage is Debian 12 with setup.sh's build packages", [
        None if build["from"] == "debian:12" else f"FROM {build['from']}, not debian:12",
        f"not in scripts/setup.sh: {sorted(build_pkgs - allowed)}"
        if build_pkgs - allowed else None,
        f"missing: {sorted(needed - build_pkgs)}" if needed - build_pkgs else None,
        None if "-DCMAKE_INSTALL_PREFIX=/opt/harp" in build_text
        else "no -DCMAKE_INSTALL_PREFIX=/opt/harp",
        None if "cmake --install" in build_text else "no cmake --install",
    ])

    final = agent[-1]
    entry = [json.loads(a) for i, a in final["body"] if i == "ENTRYPOINT"]
    runtime_pkgs = set().union(*(apt_packages(a) for i, a in final["body"] if i == "RUN"))
    need_rt = {"xdp-tools", "bpftool", "ethtool", "iproute2", "libbpf1", "libxdp1", "util-linux",
               "procps"}
    with open(os.path.join(chart, "templates", "daemonset.yaml"), encoding="utf-8") as f:
        ds_text = f.read()
    rep.check("container/agent.Dockerfile: runtime stage, install tree, entry point", [
        None if final["from"] == "debian:12-slim" else f"final stage FROM {final['from']}",
        f"runtime lacks {sorted(need_rt - runtime_pkgs)}" if need_rt - runtime_pkgs else None,
        None if ("COPY", "--from=build /opt/harp /opt/harp") in final["body"]
        else "no COPY --from=build /opt/harp /opt/harp",
        None if entry == [[HARP_ATTACH]] else f"ENTRYPOINT is {entry}, not [\"{HARP_ATTACH}\"]",
        None if f"- {HARP_ATTACH}" in ds_text else f"the chart does not run {HARP_ATTACH}",
    ])
    final = plugin[-1]
    copies = [a for i, a in final["body"] if i == "COPY"]
    layer_text = " ".join(a for s in plugin for _, a in s["body"])
    rep.check("container/plugin.Dockerfile: a scratch layer with the plugin, its alias and its "
              "libraries", [
        None if final["from"] == "scratch" else f"final stage FROM {final['from']}",
        None if copies == ["--from=layer /layer /"]
        else f"final stage copies {copies}, not the layer stage's /layer to /",
        *[None if lib in layer_text else f"{lib} not in the layer"
          for lib in ("libnccl-net-harp.so", "libbpf.so.1", "libxdp.so.1", "libsodium.so.23")],
        None if "ln -s /opt/harp/lib/libnccl-net-harp.so /layer/usr/lib/libnccl-net.so"
        in layer_text else "no /usr/lib/libnccl-net.so linking to the plugin (NCCL's default name)",
        None if "/opt/harp/lib/libnccl-net.so" in layer_text
        else "the install's libnccl-net.so alias is not in /opt/harp/lib",
    ])
    readme = os.path.join(cdir, "README.md")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    rep.check("container/README.md says how the tests build and run the images", [
        None if "tests/container/podman.sh" in text else "does not name tests/container/podman.sh"])


# --- the two modes --------------------------------------------------------------------------------

def check_manifests(rep, label, docs, known):
    for doc in docs:
        name = f"{label}: {doc.get('kind')} {(doc.get('metadata') or {}).get('name')}"
        rep.check(f"{name}: Kubernetes fields and rules", check_object(doc))
        if doc.get("kind") in ("MPIJob", "PyTorchJob", "TrainJob"):
            errs = []
            check_example_policy(doc, known, errs, docs)
            rep.check(f"{name}: harp's rules for training pods", errs)


def node_ctr(docs):
    """The runtime's node container in the TrainJob example's documents."""
    _, node = trainer_node(docs[0])
    return node["template"]["spec"]["template"]["spec"]["containers"][0]


def pod_of(docs):
    return trainer_node(docs[0])[1]["template"]["spec"]["template"]["spec"]


# (what, change to the TrainJob example's [runtime, job], text an error must contain): each must
# be refused, so the checks above are shown to catch what they are for.
TRAINJOB_MUTATIONS = [
    ("a v2.0 field (podSpecOverrides)",
     lambda d: d[1]["spec"].update(podSpecOverrides=[]), "unknown field 'podSpecOverrides'"),
    ("torch.numProcPerNode (gone in v2.2)",
     lambda d: d[0]["spec"]["mlPolicy"]["torch"].update(numProcPerNode="auto"),
     "unknown field 'numProcPerNode'"),
    ("numProcPerNode: auto (an integer since v2.2)",
     lambda d: d[1]["spec"]["trainer"].update(numProcPerNode="auto"), "positive integer"),
    ("PET_MASTER_ADDR in the TrainJob's env",
     lambda d: d[1]["spec"]["trainer"]["env"].append({"name": "PET_MASTER_ADDR", "value": "x"}),
     "Trainer's to set"),
    ("a misspelt pod field in the runtime",
     lambda d: pod_of(d).update(hostNetwrk=True), "unknown field 'hostNetwrk'"),
    ("no hostNetwork", lambda d: pod_of(d).pop("hostNetwork"), "hostNetwork is not true"),
    ("seccompProfile Unconfined",
     lambda d: node_ctr(d)["securityContext"]["seccompProfile"].update(type="Unconfined"),
     "seccompProfile is 'Unconfined'"),
    ("the node container renamed", lambda d: node_ctr(d).update(name="trainer"),
     "no container named 'node'"),
    ("no /run/harp mount",
     lambda d: node_ctr(d).update(volumeMounts=[m for m in node_ctr(d)["volumeMounts"]
                                                if m["mountPath"] != AGENT_DIR]),
     "no container mounts the node agent's /run/harp"),
    ("no hugepages in resourcesPerNode",
     lambda d: [d[1]["spec"]["trainer"]["resourcesPerNode"][k].pop("hugepages-2Mi")
                for k in ("requests", "limits")], "no hugepages-2Mi limit"),
    ("LD_LIBRARY_PATH in the TrainJob's env",
     lambda d: d[1]["spec"]["trainer"]["env"].append({"name": "LD_LIBRARY_PATH",
                                                       "value": "/opt/harp/lib"}),
     "sets LD_LIBRARY_PATH"),
]


def check_trainjob_mutations(rep, path, known):
    with open(path, encoding="utf-8") as f:
        original = load_docs(f.read())
    for what, change, want in TRAINJOB_MUTATIONS:
        docs = copy.deepcopy(original)
        change(docs)
        errs = []
        for doc in docs:
            errs += check_object(doc)
            if doc["kind"] == "TrainJob":
                check_example_policy(doc, known, errs, docs)
        hit = [e for e in errs if want in e]
        if hit:
            print(f"     ({hit[0][:150]})")
        rep.check(f"trainjob.yaml with {what} is refused", [] if hit else [
            f"no error says {want!r}: {errs[:3]}"])


def static_mode(rep, repo):
    chart = os.path.join(repo, "helm", "harp")
    examples = os.path.join(repo, "helm", "examples")
    known = harp_param_names(os.path.join(repo, "src", "params.def"))
    _, defaults = check_schema(rep, chart, examples, os.path.join(repo, "tests", "deploy",
                                                                   "bad-values"))
    check_templates(rep, chart, defaults)

    chart_meta = load_yaml(os.path.join(chart, "Chart.yaml"))
    with open(os.path.join(repo, "CMakeLists.txt"), encoding="utf-8") as f:
        version = re.search(r"project\(harp VERSION (\S+)", f.read()).group(1)
    rep.check("Chart.yaml: apiVersion v2, appVersion is harp's version", [
        None if chart_meta.get("apiVersion") == "v2" else "apiVersion is not v2",
        None if chart_meta.get("appVersion") == version
        else f"appVersion {chart_meta.get('appVersion')!r}, CMakeLists.txt says {version}",
    ])

    manifests = sorted(p for p in glob.glob(os.path.join(examples, "*.yaml"))
                       if not os.path.basename(p).startswith("values-"))
    kinds = set()
    for path in manifests:
        try:
            docs = load_docs(open(path, encoding="utf-8").read())
        except yaml.YAMLError as e:
            rep.check(f"examples/{os.path.basename(path)} parses", [str(e)])
            continue
        kinds |= {d.get("kind") for d in docs}
        check_manifests(rep, f"examples/{os.path.basename(path)}", docs, known)
    check_trainjob_mutations(rep, os.path.join(examples, "trainjob.yaml"), known)
    rep.check("helm/examples has an MPIJob, a PyTorchJob and a TrainJob with its runtime",
              [f"missing {k}" for k in ("MPIJob", "PyTorchJob", "TrainJob",
                                        "ClusterTrainingRuntime") if k not in kinds])
    for path in sorted(glob.glob(os.path.join(repo, "helm", "**", "*"), recursive=True)):
        if os.path.isfile(path) and not path.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                head = f.read(300)
            rep.check(f"{os.path.relpath(path, repo)} has an SPDX header",
                      [] if "SPDX-License-Identifier: Apache-2.0" in head else ["missing"])
    check_dockerfiles(rep, repo, chart)


def helm_run(helm, args, home):
    env = dict(os.environ, HELM_CACHE_HOME=f"{home}/cache", HELM_CONFIG_HOME=f"{home}/config",
               HELM_DATA_HOME=f"{home}/data", KUBECONFIG=f"{home}/no-kubeconfig")
    return subprocess.run([helm] + args, capture_output=True, text=True, env=env, timeout=120)


def helm_mode(rep, repo, helm):
    chart = os.path.join(repo, "helm", "harp")
    examples = os.path.join(repo, "helm", "examples")
    known = harp_param_names(os.path.join(repo, "src", "params.def"))
    defaults = load_yaml(os.path.join(chart, "values.yaml"))
    app_version = load_yaml(os.path.join(chart, "Chart.yaml"))["appVersion"]
    home = tempfile.mkdtemp(prefix="harp-helm-")
    try:
        version = helm_run(helm, ["version", "--short"], home)
        rep.check(f"helm runs ({version.stdout.strip()})",
                  [] if version.returncode == 0 else [version.stderr.strip()])
        if version.returncode != 0:
            return
        # Variants the shipped files do not reach: two interfaces, a large hugepage count
        # (Helm prints big floats as 1e+06 unless the template converts), no ServiceAccount,
        # OnDelete, an empty priority class.
        variants = {
            "variant-two-ifaces.yaml": {"interfaces": ["eth0", "eth1.100"], "hugepages": 1000000,
                                        "queues": 64, "portBase": 65472, "frameCount": 262144},
            "variant-no-agent.yaml": {"agent": {"enabled": False}},
            "variant-agent-uids.yaml": {"agent": {"hostDir": "/var/run/harp-agent",
                                                  "allowUids": [1000, 4294967294]}},
            "variant-no-sa.yaml": {"serviceAccount": {"create": False, "name": ""},
                                   "updateStrategy": {"type": "OnDelete"},
                                   "priorityClassName": "", "hugepages": "off",
                                   "podAnnotations": {"example.com/owner": "ml-infra"}},
        }
        value_files = [None] + sorted(glob.glob(os.path.join(examples, "values-*.yaml")))
        for name, content in variants.items():
            path = os.path.join(home, name)
            with open(path, "w", encoding="utf-8") as f:
                yaml.safe_dump(content, f)
            value_files.append(path)

        for vf in value_files:
            label = os.path.basename(vf) if vf else "values.yaml"
            extra = ["-f", vf] if vf else []
            lint = helm_run(helm, ["lint", "--strict", chart] + extra, home)
            rep.check(f"helm lint --strict ({label})",
                      [] if lint.returncode == 0 else [lint.stdout.strip(), lint.stderr.strip()])
            out = helm_run(helm, ["template", "harp", chart, "--namespace", "harp-system"]
                           + extra, home)
            if out.returncode != 0:
                rep.check(f"helm template ({label})", [out.stderr.strip()])
                continue
            docs = load_docs(out.stdout)
            values = coalesce(defaults, load_yaml(vf) or {}) if vf else defaults
            check_manifests(rep, f"rendered ({label})", docs, known)
            kinds = sorted(d["kind"] for d in docs)
            want = ["DaemonSet", "ServiceAccount"] if values["serviceAccount"]["create"] \
                else ["DaemonSet"]
            errs = [] if kinds == want else [f"rendered {kinds}, expected {want}"]
            ds = next((d for d in docs if d["kind"] == "DaemonSet"), None)
            if ds:
                check_agent_daemonset(ds, values, app_version, errs)
                sa = ds["spec"]["template"]["spec"].get("serviceAccountName")
                sa_docs = [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"]
                if sa_docs and sa_docs != [sa]:
                    errs.append(f"serviceAccountName {sa!r}, rendered account {sa_docs}")
                if not sa_docs and sa != "default":
                    errs.append(f"serviceAccountName {sa!r} with no account rendered")
            rep.check(f"rendered ({label}): the DaemonSet runs harp-attach as the values say",
                      errs)
            if ds:
                rep.check(f"rendered ({label}): scripts/harp-attach accepts the DaemonSet's "
                          "arguments", attach_parse_errors(repo, ds, home))

        check_notes(rep, helm, chart, home, defaults)

        for path in sorted(glob.glob(os.path.join(repo, "tests", "deploy", "bad-values",
                                                  "*.yaml"))):
            want_path, want_word = bad_values_expectation(path)
            out = helm_run(helm, ["template", "harp", chart, "-f", path], home)
            found = helm_schema_errors(out.stderr)
            errs = []
            if out.returncode == 0:
                errs.append("Helm rendered it")
            elif {p for p, _ in found} != {want_path}:
                errs.append(f"Helm's schema errors name {sorted({p for p, _ in found})}, expected "
                            f"only {want_path}: {out.stderr.strip()}")
            elif want_word and not any(want_word in m for _, m in found):
                errs.append(f"no message names {want_word!r}: {out.stderr.strip()}")
            rep.check(f"helm refuses bad-values/{os.path.basename(path)} at {want_path}", errs)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def attach_parse_errors(repo, ds, home):
    """Runs scripts/harp-attach on each command line the DaemonSet gives it (run, preStop's down,
    the probe's status) with the subcommand swapped for the read-only status and the profile and
    pins pointed into a scratch directory: exit 2 is harp-attach refusing the arguments."""
    script = os.path.join(repo, "scripts", "harp-attach")
    if not os.path.exists(script):
        return [f"{script} is missing"]
    ctr = ds["spec"]["template"]["spec"]["containers"][0]
    lines = {
        "args": ctr.get("args") or [],
        "preStop": ((((ctr.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {})
                    .get("command") or [])[1:],
        "readinessProbe": (((ctr.get("readinessProbe") or {}).get("exec") or {})
                           .get("command") or [])[1:],
    }
    scratch = tempfile.mkdtemp(prefix="attach-", dir=home)
    errs = []
    for where, argv in lines.items():
        argv = ["status" if a in ("up", "down", "run", "status") else a for a in argv]
        try:
            out = subprocess.run(["bash", script] + argv + ["--conf", f"{scratch}/harp.conf",
                                                            "--pin-root", f"{scratch}/pins"],
                                 capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            errs.append(f"{where}: harp-attach status did not finish in 60 s")
            continue
        if out.returncode == 2:
            errs.append(f"{where}: harp-attach refuses {argv}: "
                        f"{out.stderr.strip().splitlines()[0]}")
    return errs


def helm_schema_errors(stderr):
    """[(dotted path, message)] from Helm's schema failure: Helm 3 writes "- interfaces.1: msg",
    Helm 4 "- at '/interfaces/1': msg" (a JSON pointer); the top level is "(root)" in both."""
    if "don't meet the specifications of the schema" not in stderr:
        return []
    found = []
    for line in stderr.splitlines():
        m = re.match(r"^- at '([^']*)': (.*)$", line)
        if m:
            parts = [p.replace("~1", "/").replace("~0", "~") for p in m.group(1).split("/")[1:]]
            found.append((".".join(parts) or "(root)", m.group(2)))
            continue
        m = re.match(r"^- (\S+): (.*)$", line)
        if m:
            found.append((m.group(1), m.group(2)))
    return found


def check_notes(rep, helm, chart, home, defaults):
    """`helm template` does not render NOTES.txt and `helm install --dry-run` wants a cluster,
    so a copy of the chart carries NOTES.txt's text in a define, rendered into a ConfigMap by the
    same engine with the same values."""
    copy_dir = os.path.join(home, "notes-chart")
    shutil.copytree(chart, copy_dir)
    tdir = os.path.join(copy_dir, "templates")
    with open(os.path.join(tdir, "NOTES.txt"), encoding="utf-8") as f:
        notes = f.read()
    os.remove(os.path.join(tdir, "NOTES.txt"))
    with open(os.path.join(tdir, "_notes_under_test.tpl"), "w", encoding="utf-8") as f:
        f.write('{{- define "harp.notesUnderTest" -}}\n' + notes + "{{- end -}}\n")
    with open(os.path.join(tdir, "notes-under-test.yaml"), "w", encoding="utf-8") as f:
        f.write("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes-under-test\n"
                'data:\n  notes: {{ include "harp.notesUnderTest" . | toJson }}\n')
    out = helm_run(helm, ["template", "harp", copy_dir, "--namespace", "harp-system",
                          "--show-only", "templates/notes-under-test.yaml"], home)
    if out.returncode != 0:
        rep.check("NOTES.txt renders", [out.stderr.strip()])
        return
    text = load_docs(out.stdout)[0]["data"]["notes"]
    first, last = defaults["portBase"], defaults["portBase"] + defaults["portCount"] - 1
    needed = ["daemonset/harp", "-n harp-system", "rollout status",
              f"harp-attach status {' '.join(defaults['interfaces'])}", f"UDP {first}-{last}",
              "hugepages-2Mi", "NET/HARP", "kubectl label node NODE harp/enabled=true"]
    rep.check("NOTES.txt renders and tells how to check the nodes", [
        *[f"does not say {s!r}" for s in needed if s not in text],
        *[f"contains {s!r}" for s in ("<no value>", "%!", "{{", "}}") if s in text],
    ])
    print("     " + text.replace("\n", "\n     ").rstrip())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", required=True, help="the repository's root")
    parser.add_argument("--helm", help="a Helm 3 binary: check what Helm renders")
    args = parser.parse_args()
    rep = Report()
    if args.helm:
        helm_mode(rep, os.path.abspath(args.repo), args.helm)
    else:
        static_mode(rep, os.path.abspath(args.repo))
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
