"""Validates rendered Kubernetes objects against the Kubernetes JSON schemas that
kubernetes-validate carries (strict: unknown fields are errors), for each Kubernetes version
given. Custom resources (cert-manager, prometheus-operator) are written to a JSON file for
validate_custom_resources.mjs instead.

usage: validate_manifests.py RENDERED.yaml CUSTOM_OUT.json VERSION...
"""

import json
import sys

import kubernetes_validate
import yaml

CUSTOM_GROUPS = ("cert-manager.io/", "monitoring.coreos.com/")


def main() -> int:
    rendered, custom_out, versions = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(rendered, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    failed = 0
    core = 0
    custom = []
    for doc in docs:
        what = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        if str(doc.get("apiVersion", "")).startswith(CUSTOM_GROUPS):
            custom.append(doc)
            continue
        core += 1
        for version in versions:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                print(f"  INVALID {what} (Kubernetes {version}): {path}: {e.message}")
                failed += 1
            except kubernetes_validate.SchemaNotFoundError as e:
                print(f"  INVALID {what}: {e.message}")
                failed += 1
    with open(custom_out, "w", encoding="utf-8") as f:
        json.dump(custom, f)
    print(
        f"  {core} Kubernetes objects checked against the schemas of Kubernetes "
        f"{', '.join(versions)} (strict): {failed} errors"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
