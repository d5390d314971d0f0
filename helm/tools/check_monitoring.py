"""Checks that the chart renders its alert rules and Grafana dashboard unchanged from their
one source in files/: the PrometheusRule's spec.groups equal the plain rules file's groups,
and the dashboard ConfigMap's JSON equals the dashboard file.

usage: check_monitoring.py RENDERED.yaml RULES.yaml DASHBOARD.json
"""

import json
import sys

import yaml


def main() -> int:
    rendered, rules_path, dashboard_path = sys.argv[1:4]
    with open(rendered, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    with open(rules_path, encoding="utf-8") as f:
        rules = yaml.safe_load(f)
    with open(dashboard_path, encoding="utf-8") as f:
        dashboard = json.load(f)
    failed = 0
    prs = [d for d in docs if d.get("kind") == "PrometheusRule"]
    if len(prs) != 1:
        print(f"  FAILED: {len(prs)} PrometheusRules rendered, want 1")
        failed += 1
    elif prs[0]["spec"] != {"groups": rules["groups"]}:
        print("  FAILED: the PrometheusRule's groups differ from the rules file")
        failed += 1
    cms = [
        d
        for d in docs
        if d.get("kind") == "ConfigMap" and "lnet-router-fleet.json" in (d.get("data") or {})
    ]
    if len(cms) != 1:
        print(f"  FAILED: {len(cms)} dashboard ConfigMaps rendered, want 1")
        failed += 1
    elif json.loads(cms[0]["data"]["lnet-router-fleet.json"]) != dashboard:
        print("  FAILED: the dashboard ConfigMap's JSON differs from the dashboard file")
        failed += 1
    if not failed:
        n = sum(len(g["rules"]) for g in rules["groups"])
        print(f"  PrometheusRule ({n} rules) and dashboard ConfigMap match their files")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
