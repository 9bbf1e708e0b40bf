import * as pulumi from '@pulumi/pulumi';

/** The `dependsOn` a component was given, as a list (docline passes lists of resources). */
export function dependenciesOf(opts: pulumi.ResourceOptions | undefined): pulumi.Input<pulumi.Resource>[] {
  const given = opts?.dependsOn;
  if (given === undefined) return [];
  if (Array.isArray(given)) return given;
  if (pulumi.Resource.isInstance(given)) return [given];
  throw new Error('docline components take dependsOn as a resource or a list of resources, not an output');
}

/**
 * Options of a component's child: parented to the component, after whatever the component waits
 * for (Pulumi does not pass a component's dependsOn down to its children by itself), and after
 * `needs` — the resources this child needs to exist first, so that the engine sees the order.
 */
export function childOf(
  component: pulumi.ComponentResource,
  opts: pulumi.ResourceOptions | undefined,
  ...needs: pulumi.Input<pulumi.Resource>[]
): pulumi.CustomResourceOptions {
  return { parent: component, dependsOn: [...dependenciesOf(opts), ...needs] };
}
