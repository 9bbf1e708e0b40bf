import java.io.BufferedInputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import javax.xml.XMLConstants;
import javax.xml.parsers.SAXParserFactory;
import javax.xml.transform.sax.SAXSource;
import javax.xml.transform.stream.StreamSource;
import net.sf.saxon.lib.Feature;
import net.sf.saxon.s9api.DocumentBuilder;
import net.sf.saxon.s9api.Processor;
import net.sf.saxon.s9api.XPathCompiler;
import net.sf.saxon.s9api.XPathSelector;
import net.sf.saxon.s9api.XdmDestination;
import net.sf.saxon.s9api.XdmItem;
import net.sf.saxon.s9api.XdmNode;
import net.sf.saxon.s9api.Xslt30Transformer;
import net.sf.saxon.s9api.XsltCompiler;
import net.sf.saxon.s9api.XsltExecutable;
import org.xml.sax.InputSource;
import org.xml.sax.XMLReader;

/**
 * docline's EN 16931 validation runner: a long-lived process that runs the official validation
 * artefacts (schematron compiled to XSLT 2.0, as CEN/TC 434 and FNFE-MPE publish them) with
 * Saxon-HE, and answers with the assertions that failed, as SVRL reports them.
 *
 * Protocol (stdin → stdout), one request at a time:
 *   request:  a header line "ID LENGTH STYLESHEET[,STYLESHEET…]\n", then LENGTH bytes of XML;
 *             each STYLESHEET is a path relative to the artefact folder given as the first argument.
 *   answer:   one JSON line, {"id":ID,"results":[{"stylesheet":…,"ms":…,"failed":[{"id":…,
 *             "flag":…,"location":…,"text":…}],"reports":[…]}]} or {"id":ID,"error":"…"}.
 *   A request of LENGTH 0 compiles its stylesheets only: {"id":ID,"compiled":N}.
 *   "ready\n" is written once the process is up (stylesheets compile on first use, then stay).
 *
 * The XML is untrusted: it is parsed with DOCTYPE declarations refused and external entities
 * off (docline's own parser has already refused them; this is the second wall), and Saxon may
 * read only files (the artefacts' code lists), never a URL.
 */
public final class Validate {
  private static final String SVRL = "http://purl.oclc.org/dsdl/svrl";
  private static final int MAX_BYTES = 5 * 1024 * 1024;

  private final File root;
  private final Processor processor = new Processor(false);
  private final Map<String, XsltExecutable> compiled = new HashMap<>();
  private final SAXParserFactory parsers;
  private final XPathSelector failedAsserts;
  private final XPathSelector successfulReports;

  private Validate(File root) throws Exception {
    this.root = root.getCanonicalFile();
    processor.setConfigurationProperty(Feature.ALLOWED_PROTOCOLS, "file");
    parsers = SAXParserFactory.newInstance();
    parsers.setNamespaceAware(true);
    parsers.setXIncludeAware(false);
    parsers.setFeature(XMLConstants.FEATURE_SECURE_PROCESSING, true);
    parsers.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
    parsers.setFeature("http://xml.org/sax/features/external-general-entities", false);
    parsers.setFeature("http://xml.org/sax/features/external-parameter-entities", false);
    parsers.setFeature("http://apache.org/xml/features/nonvalidating/load-external-dtd", false);
    XPathCompiler xpath = processor.newXPathCompiler();
    xpath.declareNamespace("svrl", SVRL);
    failedAsserts = xpath.compile("//svrl:failed-assert").load();
    successfulReports = xpath.compile("//svrl:successful-report").load();
  }

  private XsltExecutable stylesheet(String name) throws Exception {
    XsltExecutable executable = compiled.get(name);
    if (executable != null) return executable;
    File file = new File(root, name).getCanonicalFile();
    if (!file.toPath().startsWith(root.toPath()) || !file.isFile())
      throw new IllegalArgumentException("no such stylesheet: " + name);
    XsltCompiler compiler = processor.newXsltCompiler();
    executable = compiler.compile(new StreamSource(file));
    compiled.put(name, executable);
    return executable;
  }

  private XdmNode parse(byte[] xml) throws Exception {
    XMLReader reader = parsers.newSAXParser().getXMLReader();
    // No entity is ever resolved, whatever the document asks.
    reader.setEntityResolver((publicId, systemId) -> new InputSource(new ByteArrayInputStream(new byte[0])));
    DocumentBuilder builder = processor.newDocumentBuilder();
    InputSource input = new InputSource(new ByteArrayInputStream(xml));
    input.setSystemId("urn:docline:invoice");
    return builder.build(new SAXSource(reader, input));
  }

  /** Compiles the stylesheets now (a request without XML): the first validation then waits for none. */
  private String compile(String id, String[] names) {
    try {
      for (String name : names) stylesheet(name);
      return "{\"id\":" + json(id) + ",\"compiled\":" + names.length + "}";
    } catch (Exception error) {
      return "{\"id\":" + json(id) + ",\"error\":" + json(String.valueOf(error.getMessage())) + "}";
    }
  }

  private String validate(String id, byte[] xml, String[] names) {
    if (xml.length == 0) return compile(id, names);
    StringBuilder out = new StringBuilder();
    out.append("{\"id\":").append(json(id)).append(",\"results\":[");
    try {
      XdmNode document = parse(xml);
      for (int i = 0; i < names.length; i++) {
        long started = System.nanoTime();
        Xslt30Transformer transformer = stylesheet(names[i]).load30();
        transformer.setGlobalContextItem(document);
        XdmDestination svrl = new XdmDestination();
        transformer.applyTemplates(document, svrl);
        XdmNode report = svrl.getXdmNode();
        if (i > 0) out.append(',');
        out.append("{\"stylesheet\":").append(json(names[i]));
        out.append(",\"ms\":").append((System.nanoTime() - started) / 1_000_000);
        out.append(",\"failed\":").append(assertions(failedAsserts, report));
        out.append(",\"reports\":").append(assertions(successfulReports, report));
        out.append('}');
      }
      return out.append("]}").toString();
    } catch (Exception | StackOverflowError error) {
      String message = error.getMessage() == null ? error.getClass().getSimpleName() : error.getMessage();
      return "{\"id\":" + json(id) + ",\"error\":" + json(message) + "}";
    }
  }

  private String assertions(XPathSelector selector, XdmNode report) throws Exception {
    selector.setContextItem(report);
    StringBuilder out = new StringBuilder("[");
    boolean first = true;
    for (XdmItem item : selector) {
      XdmNode node = (XdmNode) item;
      if (!first) out.append(',');
      first = false;
      out.append("{\"id\":").append(json(attribute(node, "id")));
      out.append(",\"flag\":").append(json(attribute(node, "flag")));
      out.append(",\"location\":").append(json(attribute(node, "location")));
      out.append(",\"text\":").append(json(node.getStringValue().trim().replaceAll("\\s+", " ")));
      out.append('}');
    }
    return out.append(']').toString();
  }

  private static String attribute(XdmNode node, String name) {
    String value = node.getAttributeValue(new net.sf.saxon.s9api.QName(name));
    return value == null ? "" : value;
  }

  private static String json(String s) {
    StringBuilder out = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': out.append("\\\""); break;
        case '\\': out.append("\\\\"); break;
        case '\n': out.append("\\n"); break;
        case '\r': out.append("\\r"); break;
        case '\t': out.append("\\t"); break;
        default:
          if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
          else out.append(c);
      }
    }
    return out.append('"').toString();
  }

  private static String readLine(InputStream in) throws IOException {
    ByteArrayOutputStream line = new ByteArrayOutputStream();
    int b;
    while ((b = in.read()) != -1 && b != '\n') {
      line.write(b);
      if (line.size() > 65536) throw new IOException("header line too long");
    }
    if (b == -1 && line.size() == 0) return null;
    return line.toString(StandardCharsets.UTF_8);
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: Validate ARTEFACT_DIR");
      System.exit(2);
    }
    Validate validate = new Validate(new File(args[0]));
    DataInputStream in = new DataInputStream(new BufferedInputStream(System.in));
    PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, "UTF-8");
    out.print("ready\n");
    out.flush();
    String header;
    while ((header = readLine(in)) != null) {
      String[] parts = header.trim().split(" ");
      if (parts.length != 3) {
        System.err.println("Validate: bad header: " + header);
        System.exit(2);
      }
      int length = Integer.parseInt(parts[1]);
      if (length < 0 || length > MAX_BYTES) {
        System.err.println("Validate: bad length: " + length);
        System.exit(2);
      }
      byte[] xml = new byte[length];
      in.readFully(xml);
      out.print(validate.validate(parts[0], xml, parts[2].split(",")));
      out.print('\n');
      out.flush();
    }
  }
}
