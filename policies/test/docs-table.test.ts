import { docTable } from '../../infra/test/support/doc-table';
import { policies } from '../rules';

/** The rows between the policy-pack markers of docs/deploy.md: name, level, and what it stops. */
function listedPolicies(): Array<{ name: string; level: string; stops: string }> {
  return docTable('deploy.md', 'policy-pack').map(([, name, level, stops]) => ({
    name: name!.replaceAll('`', ''),
    level: level!,
    stops: stops!,
  }));
}

describe('the policy table of docs/deploy.md', () => {
  const listed = listedPolicies();

  it('is every policy the pack registers, in its order, with its enforcement level', () => {
    expect(listed.map(({ name, level }) => [name, level])).toEqual(
      policies.map((p) => [p.name, p.enforcementLevel ?? 'advisory']),
    );
  });

  it('gives the default of every policy setting it names', () => {
    for (const { name, stops } of listed) {
      const schema = policies.find((p) => p.name === name)?.configSchema?.properties ?? {};
      for (const [, key, value] of stops.matchAll(/`(\w+)` \(default ([^)]+)\)/g)) {
        const setting = schema[key!];
        expect({ name, key, default: value }).toEqual({
          name,
          key,
          default: typeof setting === 'object' ? String(setting.default) : 'not a setting of this policy',
        });
      }
    }
  });

  it('is found between its markers, with a setting default to check', () => {
    expect(listed.length).toBeGreaterThan(5);
    expect(listed.some((p) => p.stops.includes('(default '))).toBe(true);
  });
});
