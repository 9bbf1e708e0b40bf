import * as pulumi from '@pulumi/pulumi';

/** The `dependsOn` a component was given, as a list (docline passes lists of resources). */
function dependenciesOf(opts: pulumi.ResourceOptions | undefined): pulumi.Input<pulumi.Resource>[] {
  const given = opts?.dependsOn;
  if (given === undefined) return [];
  if (Array.isArray(given)) return given;
  if (pulumi.Resource.isInstance(given)) return [given];
  throw new Error('docline components take dependsOn as a resource or a list of resources, not an output');
}

/**
 * A docline component. Its children are created with {@link child} or {@link childAfter}, so that
 * every one of them waits for what the component was told to wait for: Pulumi does not pass a
 * component's dependsOn down to its children by itself. The component's own inputs stay out of the
 * engine (each registers the outputs it has).
 */
export class DoclineComponent extends pulumi.ComponentResource {
  /** Options of a child that needs nothing beyond what the component waits for. */
  protected readonly child: pulumi.CustomResourceOptions;
  readonly #dependsOn: pulumi.Input<pulumi.Resource>[];

  /**
   * `type` is the component's type token (`docline:index:…`). It is part of every child's URN, so
   * changing it would make a deployed stack replace everything the component holds.
   */
  constructor(type: string, name: string, opts?: pulumi.ComponentResourceOptions) {
    super(type, name, {}, opts);
    this.#dependsOn = dependenciesOf(opts);
    this.child = this.childAfter();
  }

  /**
   * Options of a child: parented to the component, after whatever the component waits for (Pulumi
   * does not pass a component's dependsOn down to its children by itself), and after `needs`, the
   * resources it needs to exist first, so that the engine sees the order.
   */
  protected childAfter(...needs: pulumi.Input<pulumi.Resource>[]): pulumi.CustomResourceOptions {
    return { parent: this, dependsOn: [...this.#dependsOn, ...needs] };
  }
}

/** Arguments every docline component with resources of its own takes. */
export interface ProjectArgs {
  /** The stack's project: the component's resources go there. */
  project: pulumi.Input<string>;
}

/** Arguments of a component that keeps invoice data (a bucket, a dataset). */
export interface DataArgs extends ProjectArgs {
  /**
   * Where the data is kept: the stack's dataLocation, a multi-region such as EU or a region (for
   * BigQuery also the worker's BIGQUERY_LOCATION). Whatever is derived from an invoice stays where
   * the invoice is.
   */
  location: pulumi.Input<string>;
}

/**
 * Aliases that keep a child's URN when its component is renamed (a refactor, a new prefix). A new
 * URN is a new resource to the engine: it creates the renamed child and deletes the old one. For
 * the notification that means two notifications for the length of the update; for an auto-named
 * bucket with `forceDestroy` (a stack without deletionProtection) a new, empty bucket and the old
 * one deleted with its documents. The alias names the URN the child had under `stableName`, the
 * component's name when the child was first created; none is needed while the component still has
 * that name. The engine resolves it (pulumi/pulumi's alias semantics), so the child keeps its state,
 * its auto-name included, and is not replaced.
 */
export function renamedChildAliases(
  componentName: string,
  stableName: string | undefined,
  componentType: string,
  childName: (component: string) => string,
): pulumi.Alias[] {
  if (stableName === undefined || stableName === componentName) return [];
  return [{ name: childName(stableName), parent: pulumi.createUrn(stableName, componentType) }];
}

/**
 * The names docline's components had when a stack first created their data and its announcement:
 * the aliases of {@link renamedChildAliases} point at these, so they are spelled out here from the
 * stack name, never from a prefix a refactor could change.
 */
export function firstComponentNames(stack: string): {
  documents: string;
  warehouse: string;
  logs: string;
  delivery: string;
} {
  const first = `docline-${stack}`;
  return {
    documents: `${first}-documents`,
    warehouse: `${first}-warehouse`,
    logs: `${first}-logs`,
    delivery: `${first}-delivery`,
  };
}
