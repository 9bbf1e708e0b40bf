/**
 * The docline policy pack: `pulumi preview --policy-pack policies`. Constructing the pack starts the
 * analyzer's gRPC server, so this file does nothing else; the policies live in ./rules.
 */
import { PolicyPack } from '@pulumi/policy';
import { policies } from './rules';

new PolicyPack('docline', {
  policies,
  description:
    'Stops a second bucket notification (every document twice: two rows, two paid analyses) and the misconfigurations around it before anything is deployed.',
});
