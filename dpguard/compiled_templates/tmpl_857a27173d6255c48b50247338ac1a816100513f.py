from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'rollback.md.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_plan = resolve('plan')
    try:
        t_1 = environment.tests['none']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No test named 'none' found.")
    pass
    yield '## Rollback trigger\n'
    if t_1(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'rollback_threshold')):
        pass
        yield 'No rollback trigger applies: '
        if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'status')) == 'planned'):
            pass
            yield 'the step-time model could not price this layout'
        else:
            pass
            yield 'there is no pipeline schedule to roll back'
        yield '.'
    else:
        pass
        yield 'Measure the **aggregate GPU utilization percentage over the first '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'rollback_steps')))
        yield ' steps**, as model-FLOPs\nutilisation from the logged step time: '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'mfu_definition'), 'tokens_per_step')))
        yield ' tokens per step x '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'mfu_definition'), 'flops_per_token')))
        yield '\nmodel FLOPs per token / (step time x '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'mfu_definition'), 'gpus')))
        yield ' GPUs x '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'mfu_definition'), 'peak_tflops')))
        yield ' TFLOP/s peak). The plan\nexpects **'
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expected_utilization')))
        yield '** (a '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'mfu_definition'), 'step_time')))
        yield ' s step). nvidia-smi\'s "GPU utilization" is not this\nnumber: it counts the time any kernel runs, so ranks waiting in NCCL or DeepEP kernels, or in the bubble, read as busy.'
        if environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'rollback_to'):
            pass
            yield '\nIf it stays below **'
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'rollback_threshold_pct')))
            yield "** (the low end of the model's calibrated band), "
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'schedule')))
            yield '\nis not delivering what its complexity costs: switch to the simpler **'
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'rollback_to')))
            yield '**, expected at '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'fallback_utilization')))
            yield '.'
            if environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'fallback_below_threshold'):
                pass
                yield '\nThat is below the trigger itself: switch only once the shortfall is traced to '
                yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'schedule')))
                yield ' (not to\ncommunication or stragglers, which '
                yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'rollback_to')))
                yield ' would suffer too).'
        else:
            pass
            yield '\n'
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'schedule')))
            yield ' is already the simplest schedule, so if it stays below **'
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'rollback_threshold_pct')))
            yield "** (the low\nend of the model's calibrated band) investigate stragglers, communication and data loading before changing the schedule."
    yield '\n'

blocks = {}
debug_info = '2=19&3=22&5=32&6=34&7=38&8=42&10=46&11=49&12=53&13=57&14=60&15=62&18=67'