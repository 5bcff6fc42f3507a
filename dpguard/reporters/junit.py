"""`junit`: JUnit XML for CI dashboards (GitLab `reports:junit`, Jenkins, Azure DevOps).

One ``<testsuite>`` per manifest; in it one ``<testcase>`` per rule that fired (several findings
of one rule share its case), plus a passing ``schema`` case for a manifest that loaded and
validated. A case fails when one of its findings blocks (``--fail-on``); non-blocking findings
(warnings under ``--fail-on error``, waived findings) are listed in ``<system-out>``. Each suite's
``<properties>`` name the policy sets (name, version, digest) that judged it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from dpguard.check import FileResult
from dpguard.findings import Finding
from dpguard.reporters.model import Report, policy_line, rule_info

# Characters XML 1.0 cannot carry at all, even escaped.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _suite(report: Report, result: FileResult) -> ET.Element:
    by_code: dict[str, list[Finding]] = {}
    for finding in result.findings:
        by_code.setdefault(finding.code, []).append(finding)
    suite = ET.Element("testsuite", name=_clean(result.path))
    cases: list[ET.Element] = []
    policies = result.judged_by or report.policies
    if policies is not None:  # which rules judged: names, versions, digests
        properties = ET.Element("properties")
        line = policy_line(policies).removeprefix("policies: ")
        ET.SubElement(properties, "property", name="dpguard.policies", value=_clean(line))
        cases.append(properties)
    if result.passed_schema:
        cases.append(ET.Element("testcase", classname=_clean(result.path), name="schema"))
    failures = 0
    for code, findings in by_code.items():
        info = rule_info(report, code)
        case = ET.Element("testcase", classname=_clean(result.path), name=f"{code} {info.title}")
        blocking = [f for f in findings if report.blocking(f, result)]
        if blocking:
            failures += 1
            failure = ET.SubElement(case, "failure", message=_clean(blocking[0].message), type=code)
            failure.text = _clean("\n".join(f.format() for f in blocking))
        rest = [f for f in findings if not report.blocking(f, result)]
        if rest:
            ET.SubElement(case, "system-out").text = _clean("\n".join(f.format() for f in rest))
        cases.append(case)
    suite.set("tests", str(sum(1 for c in cases if c.tag == "testcase")))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", "0")
    suite.extend(cases)
    return suite


def render_junit(report: Report, *, color: bool = False) -> str:
    suites = [_suite(report, r) for r in report.results]
    root = ET.Element(
        "testsuites",
        name="dpguard",
        tests=str(sum(int(s.get("tests", "0")) for s in suites)),
        failures=str(sum(int(s.get("failures", "0")) for s in suites)),
        errors="0",
    )
    root.extend(suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
