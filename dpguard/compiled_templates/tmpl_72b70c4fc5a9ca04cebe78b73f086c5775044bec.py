from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'diff.md.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_report = resolve('report')
    pass
    yield str(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'marker'))
    yield '\n## dpguard: what this change costs\n\n'
    if environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'baseline'):
        pass
        yield 'Compared with `'
        yield str(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'baseline'))
        yield '` ('
        yield str(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'commit'))
        yield '); both versions judged by the same policies.'
    else:
        pass
        yield 'Both files judged by the same policies.'
    yield '\n\n'
    if environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'changes'):
        pass
        yield '\n| file | status | GPU-hours | change | bubble | memory per GPU | verdict |\n|---|---|---|---|---|---|---|'
        for l_1_c in environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'changes'):
            _loop_vars = {}
            pass
            yield '\n| `'
            yield str(environment.getattr(l_1_c, 'path'))
            yield '` | '
            yield str(environment.getattr(l_1_c, 'status'))
            yield ' | '
            yield str(environment.getattr(l_1_c, 'gpu_hours'))
            yield ' | '
            yield str(environment.getattr(l_1_c, 'gpu_hours_delta'))
            yield ' | '
            yield str(environment.getattr(l_1_c, 'bubble'))
            yield ' | '
            yield str(environment.getattr(l_1_c, 'memory'))
            yield ' | '
            yield str(environment.getattr(l_1_c, 'verdict'))
            yield ' |'
        l_1_c = missing
        yield '\n| **total** | | **'
        yield str(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'gpu_hours'))
        yield '** | **'
        yield str(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'gpu_hours_delta'))
        yield '** | | | |'
        if environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'unsized'):
            pass
            yield '\n\n'
            yield str(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'unsized'))
            yield ' changed files could not be sized and are left out of the total.'
        yield '\n'
        if environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'currency'):
            pass
            yield '\nCost ('
            yield str(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'currency'))
            yield '): '
            yield str(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'cost'))
            yield ' ('
            yield str(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'cost_delta'))
            yield ').\n'
        yield '\n'
    else:
        pass
        yield '\nNo manifest changed.\n'
    yield '\n**'
    yield str(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'files'))
    yield ' manifests checked now: '
    yield str((environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'files') - environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'failed')))
    yield ' passed, '
    yield str(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'failed'))
    yield ' failed ('
    yield str(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'errors'))
    yield ' errors, '
    yield str(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'warnings'))
    yield ' warnings)**\n'
    l_1_loop = missing
    for l_1_c, l_1_loop in LoopContext(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'changes'), undefined):
        _loop_vars = {}
        pass
        yield '\n\n### `'
        yield str(environment.getattr(l_1_c, 'path'))
        yield '`: '
        yield str(environment.getattr(l_1_c, 'status'))
        yield '\n\n| | |\n|---|---|\n| layout | '
        yield str(environment.getattr(l_1_c, 'layout'))
        yield ' |\n| GPU-hours | '
        yield str(environment.getattr(l_1_c, 'gpu_hours'))
        yield ' ('
        yield str(environment.getattr(l_1_c, 'gpu_hours_delta'))
        yield ') |'
        if environment.getattr(l_1_c, 'cost'):
            pass
            yield '\n| cost | '
            yield str(environment.getattr(l_1_c, 'cost'))
            yield ' ('
            yield str(environment.getattr(l_1_c, 'cost_delta'))
            yield ') |'
        yield '\n| bubble | '
        yield str(environment.getattr(l_1_c, 'bubble'))
        yield ' ('
        yield str(environment.getattr(l_1_c, 'bubble_delta'))
        yield ') |\n| memory per GPU (worst rank) | '
        yield str(environment.getattr(l_1_c, 'memory'))
        yield ' |\n| verdict | '
        yield str(environment.getattr(l_1_c, 'verdict'))
        yield ' |\n'
        if environment.getattr(l_1_c, 'changed'):
            pass
            yield '\nChanged: '
            l_2_loop = missing
            for l_2_k, l_2_loop in LoopContext(environment.getattr(l_1_c, 'changed'), undefined):
                _loop_vars = {}
                pass
                yield str(l_2_k)
                if (not environment.getattr(l_2_loop, 'last')):
                    pass
                    yield '; '
            l_2_loop = l_2_k = missing
            yield '.\n'
        if (environment.getattr(l_1_c, 'added') or environment.getattr(l_1_c, 'resolved')):
            pass
            yield '\n\n| | severity | rule | where | message |\n|---|---|---|---|---|'
            for l_2_f in environment.getattr(l_1_c, 'added'):
                _loop_vars = {}
                pass
                yield '\n| new | '
                yield str(environment.getattr(l_2_f, 'severity'))
                yield ' | '
                yield str(environment.getattr(l_2_f, 'code'))
                yield ' | '
                yield str(environment.getattr(l_2_f, 'where'))
                yield ' | '
                yield str(environment.getattr(l_2_f, 'message'))
                yield ' |'
            l_2_f = missing
            for l_2_f in environment.getattr(l_1_c, 'resolved'):
                _loop_vars = {}
                pass
                yield '\n| resolved | '
                yield str(environment.getattr(l_2_f, 'severity'))
                yield ' | '
                yield str(environment.getattr(l_2_f, 'code'))
                yield ' | '
                yield str(environment.getattr(l_2_f, 'where'))
                yield ' | '
                yield str(environment.getattr(l_2_f, 'message'))
                yield ' |'
            l_2_f = missing
        yield '\n'
        if environment.getattr(l_1_c, 'unchanged'):
            pass
            yield '\n'
            yield str(environment.getattr(l_1_c, 'unchanged'))
            yield ' findings unchanged.\n'
    l_1_loop = l_1_c = missing
    yield '\n'
    for l_1_u in environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'unreadable'):
        _loop_vars = {}
        pass
        yield '\n- `'
        yield str(environment.getattr(l_1_u, 'path'))
        yield '` cannot be compared: '
        yield str(environment.getattr(l_1_u, 'message'))
    l_1_u = missing
    yield '\n'
    if environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'policies'):
        pass
        yield '\n\n<sub>'
        yield str(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'policies'))
        yield '</sub>\n'
    yield '\n'

blocks = {}
debug_info = '3=12&6=14&8=25&11=28&12=32&14=48&15=52&17=55&19=58&20=61&25=72&26=83&28=87&32=91&33=93&34=97&35=100&37=105&38=109&39=111&40=113&41=117&43=126&47=129&48=133&50=142&51=146&54=156&55=159&58=163&59=167&61=172&63=175'