"""`junit`: JUnit XML for CI dashboards (GitLab `reports:junit`, Jenkins, Azure DevOps).

One ``<testsuite>`` per manifest; in it one ``<testcase>`` per rule that fired (several findings
of one rule share its case), plus a passing ``schema`` case for a manifest that loaded and
validated. A case fails when one of its findings blocks (``--fail-on``); non-blocking findings
(warnings under ``--fail-on error``, waived findings) are listed in ``<system-out>``. Each suite's
``<properties>`` name the policy sets (name, version, digest) that judged it.

Text from files is escaped as in the text report (`dpguard.reporters.safe`): the serialiser
handles ``<`` and ``&`` but writes a line break in element text as it is, and a CI job may print
the file into its log, where a line of it must not start a workflow command; the controls it
escapes are also the characters XML 1.0 cannot carry at all.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dpguard.check import FileResult
from dpguard.findings import Finding
from dpguard.policy.model import policy_line
from dpguard.reporters.model import Report, rule_info
from dpguard.reporters.safe import safe_line, visible


def _lines(findings: list[Finding]) -> str:
    """One line per finding, file text escaped: the only line breaks are dpguard's."""
    return "\n".join(safe_line(f.format()) for f in findings)


def _suite(report: Report, result: FileResult) -> ET.Element:
    by_code: dict[str, list[Finding]] = {}
    for finding in result.findings:
        by_code.setdefault(finding.code, []).append(finding)
    path = visible(result.path)
    suite = ET.Element("testsuite", name=path)
    cases: list[ET.Element] = []
    policies = result.judged_by or report.policies
    if policies is not None:  # which rules judged: names, versions, digests
        properties = ET.Element("properties")
        line = policy_line(policies).removeprefix("policies: ")
        ET.SubElement(properties, "property", name="dpguard.policies", value=visible(line))
        if result.config:  # which configuration judged the file
            ET.SubElement(
                properties, "property", name="dpguard.config", value=visible(result.config)
            )
        cases.append(properties)
    if result.passed_schema:
        cases.append(ET.Element("testcase", classname=path, name="schema"))
    failures = 0
    for code, findings in by_code.items():
        info = rule_info(report, code)
        case = ET.Element("testcase", classname=path, name=visible(f"{code} {info.title}"))
        blocking = [f for f in findings if report.blocking(f, result)]
        if blocking:
            failures += 1
            message = visible(blocking[0].message)
            failure = ET.SubElement(case, "failure", message=message, type=code)
            failure.text = _lines(blocking)
        rest = [f for f in findings if not report.blocking(f, result)]
        if rest:
            ET.SubElement(case, "system-out").text = _lines(rest)
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
