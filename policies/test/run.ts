import { policies } from '../rules';
import { analyzeAll, type Diagnostic, type PackConfig, type StackResource } from './harness';

/** Live listing is rule 7's own suite; everywhere else it is switched off through its config. */
const OFFLINE: PackConfig = {
  'live-bucket-notifications': { enabled: false },
  'live-bucket-notifications-unchecked': { enabled: false },
};

/** Every diagnostic the whole pack gives for a stack, as the engine would collect them. */
export function check(resources: readonly StackResource[], config: PackConfig = {}): Promise<Diagnostic[]> {
  return analyzeAll(resources, { policies, config: { ...OFFLINE, ...config } });
}

/** The diagnostics as `policy @ resource name` strings, the shape most expectations compare. */
export function summary(diagnostics: readonly Diagnostic[]): string[] {
  return diagnostics.map((d) => `${d.policyName} @ ${d.urn?.split('::').pop() ?? 'stack'}`);
}
